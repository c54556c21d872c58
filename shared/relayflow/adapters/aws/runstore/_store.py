"""The DynamoDB run store: a versioned header item per run plus pages of its journal entries.

A save's changed entries ride in the header itself while it stays within one write unit;
otherwise they (with those the header held) are written as a page set (plain writes under a
key no other write uses) before the header that makes them visible. The header write is
conditional on its version (or on not existing, for inserts). Readers follow the header to
its pages and ignore any other, so a save whose header write fails leaves the run exactly as
it was. A save that changes no entry, or whose entries fit in the header, is one conditional
``PutItem``. Listing uses the workflow/status/environment indexes with opaque cursors; the
sparse wake-time index serves the sweeper.

The same partition holds the run's checkpoint log (``log#<seq>`` items, written by step hosts
through ``checkpoints.DynamoDBCheckpointLog``); this store reads past them.
docs/operations/storage.md lists every item and index.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import secrets
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from relayflow.adapters.aws import attributes, tables
from relayflow.adapters.aws.checkpoints import LOG_PREFIX
from relayflow.adapters.aws.errors import AwsServiceError, error_code, is_aws_error, reraise
from relayflow.adapters.aws.runstore import _codec, _keys, _pages
from relayflow.adapters.aws.runstore._carried import CarriedUsage, carrying_usage
from relayflow.adapters.aws.runstore._header import HeaderCodec, wake_index
from relayflow.adapters.aws.runstore._index_queries import RunIndexReader
from relayflow.adapters.aws.runstore._layout import Layout, header_put, lay_out
from relayflow.adapters.aws.runstore._snapshot import RunSnapshot, StoredPart, diff
from relayflow.adapters.aws.runstore._upkeep import RunUpkeep
from relayflow.adapters.aws.usage import AwsUsageRecorder, PrepaidWrites
from relayflow.clock import SystemClock
from relayflow.core.record import TERMINAL_STATUSES, RunRecord
from relayflow.core.views import UnavailableValue
from relayflow.costs.meter import UsageMeter
from relayflow.costs.usage import RunUsage
from relayflow.errors import RunAlreadyExistsError, StaleRunError, ValidationError
from relayflow.payloads import UNREADABLE_PAYLOADS
from relayflow.ports import Clock, PayloadStore, RunPage, RunQuery, VersionUsage

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

    from relayflow.config import Settings

_STATES = 64
_LOAD_ATTEMPTS = 5
#: Compact a run's pages when superseded entries pass both its live bytes and this.
_COMPACT_MIN = 256 * 1024
_MISSING = object()
#: The header attribute holding its inline entries (see ``_pages``).
_INLINE = "i"
#: Rounds of pricing a save's own writes into the usage it stores (the usage is part of the
#: header it prices; two rounds settle it but at a write unit's edge).
_PRICING_ROUNDS = 4


class DynamoDBRunStore:
    """A :class:`~relayflow.ports.RunStore` on one DynamoDB table (see ``tables.RUNS_TABLE``).

    Records returned share their journal entries, input and output with the store's memory
    of the run: change them by replacing an entry, never by editing one in place (as the
    core does).

    Args:
        table_name: The runs table.
        client_factory: Returns the DynamoDB client (called on first use, then cached).
        retention_days: Finished runs expire (TTL) this many days after they end.
        clock: Time for TTLs when a record has no ``completed_at``.
        payload_store: Holds entries and header fields too large for an item (without one,
            entries too large for an item are refused).
        expire_entries: Also stamp the TTL on the page items written before a run finished
            (once, by the save that ends it); without it, those items outlive their header.
        usage: The AWS work counted per run and not saved yet: each save adds the run's to
            the usage stored with it (None: records keep the usage they are given).
        pricing: Prices the requests of the clients ``usage`` counts: with it, a save also
            stores what its own writes cost (priced before they are sent), so that it does
            not wait for the run's next save, which may be made by another process.
    """

    def __init__(
        self,
        table_name: str,
        *,
        client_factory: Callable[[], DynamoDBClient],
        retention_days: int = 30,
        clock: Clock | None = None,
        payload_store: PayloadStore | None = None,
        expire_entries: bool = True,
        usage: UsageMeter | None = None,
        pricing: AwsUsageRecorder | None = None,
    ) -> None:
        self.table_name = table_name
        self._usage = usage
        self._pricing = pricing if usage is not None else None
        self.retention_days = retention_days
        self._client_factory = client_factory
        self._client: DynamoDBClient | None = None
        self._clock: Clock = clock or SystemClock()
        self._payloads = payload_store
        self._expire_entries = expire_entries
        self._states: OrderedDict[str, RunSnapshot] = OrderedDict()
        self._lock = threading.Lock()
        self._headers = HeaderCodec(payload_store)
        self._reader = RunIndexReader(table_name, self._db, self._headers.listed)
        self._upkeep = RunUpkeep(table_name, self._db)

    @classmethod
    def from_settings(
        cls,
        settings: Settings,
        *,
        client_factory: Callable[[], DynamoDBClient],
        clock: Clock | None = None,
        payload_store: PayloadStore | None = None,
        usage: UsageMeter | None = None,
        pricing: AwsUsageRecorder | None = None,
    ) -> DynamoDBRunStore:
        """A store on ``RELAYFLOW_TABLE_NAME`` with the configured retention."""
        return cls(
            settings.require("table_name"),
            client_factory=client_factory,
            retention_days=settings.retention_days,
            clock=clock,
            payload_store=payload_store,
            usage=usage,
            pricing=pricing,
        )

    def _db(self) -> DynamoDBClient:
        if self._client is None:
            self._client = self._client_factory()
        return self._client

    # ---- reads ----------------------------------------------------------------------------

    def get(self, run_id: str) -> RunRecord | None:
        """The full record (header and every entry), or None.

        When this store wrote or read the stored version last, only the header's version is
        read: a version never changes, so the remembered record is that version.
        """
        with self._lock:
            state = self._states.get(run_id)
        if state is not None and state.record is not None:
            answer = self._call(
                "reading run " + run_id,
                self._db().get_item,
                TableName=self.table_name,
                Key={tables.PK: attributes.s(run_id), tables.SK: attributes.s(_keys.HEADER_SK)},
                ProjectionExpression="version, #m",
                ExpressionAttributeNames={"#m": tables.DELIVERY_MARK},
                ConsistentRead=True,
            )
            found = answer.get("Item", {})
            stored = found.get("version", {}).get("N")
            if stored is not None and int(stored) == state.version:
                record = _codec.detached(state.record)
                if tables.DELIVERY_MARK in found:
                    record = record.model_copy(update={"dirty": True, "delivery_mark": True})
                return record
        state = self._fresh(run_id)
        return None if state is None or state.record is None else _codec.detached(state.record)

    def mark_dirty(self, run_id: str, *, version: int) -> bool:
        """Mark the run's header (an attribute of its own, never an index's; see the port)."""
        return self._upkeep.mark_delivery(run_id, version)

    def get_header(self, run_id: str) -> RunRecord | None:
        """The header item alone (one ``GetItem`` of under 4 KB, no page read, no payload
        read): the record's per-entry collections are empty and its fields held in the payload
        store at their defaults. The sweeper uses it to pass over runs in flight."""
        answer = self._call(
            "reading run " + run_id,
            self._db().get_item,
            TableName=self.table_name,
            Key={tables.PK: attributes.s(run_id), tables.SK: attributes.s(_keys.HEADER_SK)},
            ConsistentRead=True,
        )
        item = answer.get("Item")
        return None if item is None else self._headers.bare(item)

    def get_lenient(self, run_id: str) -> tuple[RunRecord, list[UnavailableValue]] | None:
        """The record with the values its payload store no longer gives left out, and which
        ones those are; None when there is no such run.

        For views only: the record is neither remembered nor ever saved (a save would drop
        the values left out).
        """
        unavailable: list[UnavailableValue] = []
        state = self._load(run_id, unavailable)
        if state is None or state.record is None:
            return None
        return state.record, unavailable

    def _fresh(self, run_id: str) -> RunSnapshot | None:
        """Read the stored run (and finish its expiry if the save that ended it could not)."""
        state = self._load(run_id)
        if state is None:
            self._forget(run_id)
            return None
        self._keep(run_id, state)
        if state.expiry_pending and state.terminal and state.record is not None:
            expires = self._expiry(state.record)
            if expires is not None and self._upkeep.stamp(run_id, expires):
                self._upkeep.clear_expiry_mark(run_id, state.version)
                state.expiry_pending = False
        return state

    def _load(
        self, run_id: str, unavailable: list[UnavailableValue] | None = None
    ) -> RunSnapshot | None:
        for _ in range(_LOAD_ATTEMPTS):
            header, pages = self._read_partition(run_id)
            if header is None:
                return None
            version = int(header["version"]["N"])
            head = header["head"]["S"] if "head" in header else None
            inline = header[_INLINE]["B"] if _INLINE in header else None
            try:
                decoded = _pages.decode(version, head, pages, inline)
            except _pages.IncompleteChainError:
                continue  # a compaction removed pages while we read: read again
            return self._state_of(header, decoded, unavailable)
        raise AwsServiceError(
            f"run {run_id} kept changing while it was read", aws_code="RunChanging", transient=True
        )

    def _read_partition(
        self, run_id: str
    ) -> tuple[dict[str, Any] | None, dict[str, dict[str, Any]]]:
        header: dict[str, Any] | None = None
        pages: dict[str, dict[str, Any]] = {}
        # The header (``#run``) and the pages (``g#``) sort before the checkpoint log
        # (``log#``), whose entries stay in the partition until they expire: a read of the run
        # stops short of them, or it would pay for every checkpoint of the last seven days.
        params: dict[str, Any] = {
            "TableName": self.table_name,
            "KeyConditionExpression": "#pk = :pk AND #sk < :log",
            "ExpressionAttributeNames": {"#pk": tables.PK, "#sk": tables.SK},
            "ExpressionAttributeValues": {
                ":pk": attributes.s(run_id),
                ":log": attributes.s(LOG_PREFIX),
            },
            "ConsistentRead": True,
        }
        while True:
            page = self._call("reading run " + run_id, self._db().query, **params)
            for item in page.get("Items", []):
                sk = item[tables.SK]["S"]
                if sk == _keys.HEADER_SK:
                    header = item
                elif sk.startswith(_keys.PAGE_PREFIX):
                    pages[sk] = item
            if "LastEvaluatedKey" not in page:
                return header, pages
            params["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def _state_of(
        self,
        header: dict[str, Any],
        decoded: _pages.Decoded,
        unavailable: list[UnavailableValue] | None = None,
    ) -> RunSnapshot:
        doc, fields = self._headers.read(header, unavailable=unavailable)
        values: list[tuple[_codec.PartId, Any]] = []
        for part, (value, ref) in decoded.parts.items():
            if ref is not None:
                try:
                    value = json.loads(self._payload_store().get(ref))
                except UNREADABLE_PAYLOADS as exc:
                    if unavailable is None:
                        raise
                    path = _codec.part_path(part)
                    unavailable.append(UnavailableValue(path=path, reason=exc.code, ref=ref))
                    continue
            values.append((part, value))
        record = RunRecord.from_document(_codec.join_document(doc, values))
        objects = dict(_codec.iter_parts(record))
        parts: dict[str, dict[_codec.PartId, StoredPart]] = {}
        live = 0
        for part, (_, ref) in decoded.parts.items():
            obj = objects.get(part, _MISSING)
            if obj is _MISSING:
                continue
            data = attributes.encode(obj)
            size = len(data) if ref is None else _pages.ref_size(ref)
            parts.setdefault(_codec.group_of(part[0]), {})[part] = StoredPart(
                obj, _codec.digest(data), size, ref
            )
            live += _pages.entry_cost(part, size)
        stored_fields = self._headers.stored_fields(record, fields)
        return RunSnapshot(
            version=record.version,
            record=record,
            parts=parts,
            head=header["head"]["S"] if "head" in header else None,
            chain=decoded.chain,
            stored=decoded.stored,
            live=live,
            dead=decoded.dead,
            fields=stored_fields,
            expiry_pending="xp" in header,
            wake_index=int(header[tables.WAKE_BUCKET]["N"])
            if tables.WAKE_BUCKET in header
            else None,
            inline=_pages.entries_of(header[_INLINE]["B"]) if _INLINE in header else [],
        )

    # ---- writes ---------------------------------------------------------------------------

    def try_insert(self, record: RunRecord) -> RunRecord:
        """Insert ``record`` at version 1.

        Raises:
            RunAlreadyExistsError: A run with this id exists; ``existing`` is that run.
        """
        with carrying_usage(record, None, self._usage) as carried:
            return self._insert(record.model_copy(update={"version": 1}), carried)

    def _insert(self, record: RunRecord, carried: CarriedUsage) -> RunRecord:
        for _ in range(3):
            try:
                stored, state = self._write(record, RunSnapshot(version=0), carried, insert=True)
            except _ConditionFailed as failed:
                existing = self._existing_from(record.id, failed.item)
                if existing is None:
                    continue  # deleted between our write and our read: try again
                raise RunAlreadyExistsError(existing=existing) from None
            self._keep(record.id, state)
            return stored
        raise StaleRunError(f"run {record.id} kept changing while it was being inserted")

    def _existing_from(self, run_id: str, old: dict[str, Any] | None) -> RunRecord | None:
        if old is not None and "z" in old and "head" not in old and _INLINE not in old:
            return self._headers.record(old)
        return self.get(run_id)

    def save(self, record: RunRecord, *, expected_version: int) -> RunRecord:
        """Store ``record`` as version ``expected_version + 1`` if the stored one matches.

        Raises:
            StaleRunError: The stored run is at another version.
        """
        with self._lock:
            state = self._states.get(record.id)
        if state is None or state.version != expected_version:
            state = self._fresh(record.id)
            if state is None or state.version != expected_version:
                stored = None if state is None else state.version
                raise StaleRunError(
                    f"run {record.id} is at version {stored}, not {expected_version}"
                )
        with carrying_usage(record, state, self._usage) as carried:
            unsaved = record.model_copy(update={"version": expected_version + 1})
            try:
                saved, new_state = self._write(unsaved, state, carried, insert=False)
            except _ConditionFailed as exc:
                self._forget(record.id)
                found = exc.version
                raise StaleRunError(
                    f"run {record.id} is at version {found if found is not None else 'unknown'}, "
                    f"not {expected_version}"
                ) from None
        self._keep(record.id, new_state)
        if saved.is_terminal and self._usage is not None:
            # What follows the final save is never recorded: nothing is held for a run that
            # ended (a redrive starts counting again).
            self._usage.drop(record.id)
        return saved

    def _write(
        self, record: RunRecord, old: RunSnapshot, carried: CarriedUsage, *, insert: bool
    ) -> tuple[RunRecord, RunSnapshot]:
        """Write what changed (inline in the header, or as pages first), then the conditional
        header; returns the record as stored and its state. A record read with a delivery's
        mark clears it; any other fails on one."""
        run_id = record.id
        expires = self._expiry(record)
        if old.terminal and expires is None and self._expire_entries:
            # The run ended and lives again (a redrive): nothing of it may expire while it
            # runs. Done before the header says so, so a crash in between leaves at worst
            # the pages of an ended run without their expiry, never a live run with one.
            self._upkeep.unstamp(run_id)
        change = diff(record, old, lambda part, data: self._offload(run_id, part, data))
        # The save that ends the run stamps the expiry on the pages written before it and on
        # its delivery ids (and a later save retries if that failed); pages written from then
        # on carry it already.
        stamp = (
            self._expire_entries
            and expires is not None
            and not insert
            and (
                old.expiry_pending
                or (not old.terminal and (old.head is not None or old.dead or _delivered(record)))
            )
        )
        new = RunSnapshot(
            version=record.version,
            record=None,
            parts=change.parts,
            head=old.head,
            chain=old.chain,
            stored=old.stored,
            live=change.live,
            dead=old.dead,
            expiry_pending=bool(stamp),
            wake_index=wake_index(record, old, self._clock.now_ms()),
        )
        written = [*change.written, *((part, None, None) for part in change.removed)]
        encoded = _pages.encode_entries(written)
        layout = Layout(
            pending=[*old.inline, *encoded],
            prev=old.head,
            commit=_keys.commit_id(record.version, secrets.token_hex(4)),
            expires=expires,
        )
        new.stored += sum(len(entry) + 1 for entry in encoded)
        superseded: list[str] = []
        if encoded and old.head is not None and new.stored - new.live > max(new.live, _COMPACT_MIN):
            # Rewrite the live entries as one chain of their own; the old one goes.
            layout.pending = _pages.encode_entries(
                [
                    (part, None if p.ref is not None else attributes.encode(p.obj), p.ref)
                    for group in new.parts.values()
                    for part, p in group.items()
                ]
            )
            layout.prev, layout.compacting, superseded = None, True, old.chain
            new.chain, new.stored = [], sum(len(entry) + 1 for entry in layout.pending)
        layout.chain = new.chain
        put = functools.partial(
            header_put, self.table_name, insert=insert, old=old.version, marked=record.delivery_mark
        )
        stored, header, items, quotes = self._priced(record, old, new, layout, carried, put)
        page_keys = [item[tables.SK]["S"] for item in items]
        prepaid = PrepaidWrites(quotes=[])
        try:
            with self._prepaid(quotes) as prepaid:
                if items:
                    self._upkeep.put_pages(run_id, items)
                self._put_header(run_id, put(header))
        except _ConditionFailed as failed:
            if failed.item != header:
                carried.not_stored(prepaid.consumed)
                self._upkeep.delete(run_id, page_keys)
                raise
            # Else an earlier attempt of this very request was applied: the write is done.
        except BaseException:
            carried.not_stored(prepaid.consumed)
            raise
        new.record = _codec.detached(stored)
        garbage_keys = [*superseded, *old.dead]
        if garbage_keys:
            self._upkeep.delete(run_id, garbage_keys)
            new.dead = []
        if (
            stamp
            and expires is not None
            and self._upkeep.stamp(run_id, expires, deliveries=_delivered(record))
        ):
            new.expiry_pending = False
        return stored, new

    def _priced(
        self,
        record: RunRecord,
        old: RunSnapshot,
        new: RunSnapshot,
        layout: Layout,
        carried: CarriedUsage,
        put: Callable[[dict[str, Any]], dict[str, Any]],
    ) -> tuple[RunRecord, dict[str, Any], list[dict[str, Any]], list[RunUsage]]:
        """The record to store with its usage, its header and page items, and what each
        write costs when the save carries its own writes (the usage is part of the header it
        prices, so it is priced again until that settles; if it does not, the writes are
        counted when made and the next save carries them)."""
        own = RunUsage()
        known = old
        for _ in range(_PRICING_ROUNDS if self._pricing is not None else 1):
            stored = record.model_copy(
                update={"usage": carried.with_own(own), "delivery_mark": False}
            )
            packed, new.fields = self._headers.document(stored, known)
            # A header field put in the payload store once is not put again.
            known = dataclasses.replace(old, fields=new.fields)
            header, items = lay_out(self._headers, stored, packed, new, layout)
            if self._pricing is None:
                return stored, header, items, []
            quotes = [
                self._pricing.quote("BatchWriteItem", request)
                for request in self._upkeep.page_requests(items)
            ]
            quotes.append(self._pricing.quote("PutItem", put(header)))
            priced = functools.reduce(RunUsage.plus, quotes, RunUsage())
            if priced == own:
                return stored, header, items, quotes
            own = priced
        stored = record.model_copy(
            update={"usage": carried.with_own(RunUsage()), "delivery_mark": False}
        )
        packed, new.fields = self._headers.document(stored, known)
        header, items = lay_out(self._headers, stored, packed, new, layout)
        return stored, header, items, []

    def _prepaid(self, quotes: list[RunUsage]) -> contextlib.AbstractContextManager[PrepaidWrites]:
        if self._pricing is None:
            return contextlib.nullcontext(PrepaidWrites(quotes=[]))
        return self._pricing.prepaid(quotes)

    def _put_header(self, run_id: str, request: dict[str, Any]) -> None:
        try:
            self._db().put_item(**request)
        except Exception as exc:
            if is_aws_error(exc) and error_code(exc) == "ConditionalCheckFailedException":
                raise _ConditionFailed(getattr(exc, "response", {}).get("Item")) from None
            reraise(exc, f"writing run {run_id}")

    def _expiry(self, record: RunRecord) -> int | None:
        if record.status not in TERMINAL_STATUSES:
            return None
        ended = record.completed_at if record.completed_at is not None else self._clock.now_ms()
        return ended // 1000 + self.retention_days * 86_400

    def _offload(self, run_id: str, part: _codec.PartId, data: bytes) -> str:
        if self._payloads is None:
            raise ValidationError(
                f"entry {part[0]}:{part[1]} of run {run_id} is {len(data)} bytes, "
                "too large for a DynamoDB item; configure a payload store"
            )
        return self._payloads.put(data)

    def _payload_store(self) -> PayloadStore:
        if self._payloads is None:
            raise ValidationError("this run has entries in the payload store; configure one")
        return self._payloads

    # ---- remembered states ----------------------------------------------------------------

    def _keep(self, run_id: str, state: RunSnapshot) -> None:
        with self._lock:
            self._states[run_id] = state
            self._states.move_to_end(run_id)
            while len(self._states) > _STATES:
                self._states.popitem(last=False)

    def _forget(self, run_id: str) -> None:
        with self._lock:
            self._states.pop(run_id, None)

    # ---- listing --------------------------------------------------------------------------

    def list_runs(self, query: RunQuery) -> RunPage:
        """Runs matching ``query``, newest first; the records carry their header fields only.

        The journal, streams and other per-entry collections are empty in listed records
        (``get`` returns them); ``next_cursor`` resumes after the last run of the page.
        """
        return self._reader.list_runs(query)

    def due_runs(self, before_ms: int, limit: int = 100) -> list[str]:
        """Ids of runs whose wake time is at or before ``before_ms``, earliest first."""
        return self._reader.due_runs(before_ms, limit)

    def version_usage(self, function: str) -> VersionUsage:
        """Whether a run pinned to the qualified function ``function`` lives, or when the
        last one ended (the code-version index; see ``tables.INDEX_BY_CODE_VERSION``)."""
        return self._reader.version_usage(function)

    def _call(self, action: str, fn: Callable[..., Any], **params: Any) -> Any:
        try:
            return fn(**params)
        except Exception as exc:
            reraise(exc, action)


class _ConditionFailed(Exception):
    def __init__(self, item: dict[str, Any] | None) -> None:
        super().__init__("condition failed")
        self.item = item
        self.version = int(item["version"]["N"]) if item and "version" in item else None


def _delivered(record: RunRecord) -> bool:
    """Whether the run may have delivery ids in the log: every delivery it took stays in
    its inbox or among its consumed ids (never emptied once a delivery was taken)."""
    return bool(record.seen_injection_ids or record.inbox)
