"""DynamoDB run store: a versioned header item per run plus one item per growing entry.

Every write is one ``TransactWriteItems``: the header, conditional on its version (or on not
existing, for inserts), and only the entry items that changed, so a checkpoint costs the same
whatever the length of the run. Listing uses the workflow/status/environment indexes with
opaque cursors; the sparse wake-time index serves the sweeper.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from relayflow.adapters.aws import run_items as ri
from relayflow.adapters.aws import tables as t
from relayflow.adapters.aws.errors import error_code, is_aws_error, reraise
from relayflow.adapters.aws.run_queries import RunIndexReader, time_key, wake_shard
from relayflow.core.record import TERMINAL_STATUSES, RunRecord
from relayflow.errors import RunAlreadyExistsError, StaleRunError, ValidationError
from relayflow.ports import Clock, PayloadStore, RunPage, RunQuery

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

    from relayflow.config import Settings

_log = logging.getLogger(__name__)
_TRANSACTION_ITEMS = 100
_TRANSACTION_BYTES = 3_500_000
_SNAPSHOTS = 512
_RECORDS = 64


class _SystemClock:
    def now_ms(self) -> int:
        return int(time.time() * 1000)


class DynamoDBRunStore:
    """A :class:`~relayflow.ports.RunStore` on one DynamoDB table (see ``tables.RUNS_TABLE``).

    Args:
        table_name: The runs table.
        client_factory: Returns the DynamoDB client (called on first use, then cached).
        retention_days: Finished runs expire (TTL) this many days after they end.
        clock: Time for TTLs when a record has no ``completed_at``.
        payload_store: Holds entries too large for an item (without one they are refused).
        expire_entries: Also stamp the TTL on every entry item when a run finishes (one write
            per entry, once); without it, entry items outlive their header.
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
    ) -> None:
        self.table_name = table_name
        self.retention_days = retention_days
        self._client_factory = client_factory
        self._client: DynamoDBClient | None = None
        self._clock: Clock = clock or _SystemClock()
        self._payloads = payload_store
        self._expire_entries = expire_entries
        self._snapshots: OrderedDict[str, ri.Snapshot] = OrderedDict()
        self._records: OrderedDict[str, RunRecord] = OrderedDict()
        self._lock = threading.Lock()
        self._reader = RunIndexReader(table_name, self._db, self._header_record)

    @classmethod
    def from_settings(
        cls,
        settings: Settings,
        *,
        client_factory: Callable[[], DynamoDBClient],
        clock: Clock | None = None,
        payload_store: PayloadStore | None = None,
    ) -> DynamoDBRunStore:
        """A store on ``RELAYFLOW_TABLE_NAME`` with the configured retention."""
        return cls(
            settings.require("table_name"),
            client_factory=client_factory,
            retention_days=settings.retention_days,
            clock=clock,
            payload_store=payload_store,
        )

    def _db(self) -> DynamoDBClient:
        if self._client is None:
            self._client = self._client_factory()
        return self._client

    # ---- reads ----------------------------------------------------------------------------

    def get(self, run_id: str) -> RunRecord | None:
        """The full record (header and every entry), or None.

        When this store wrote or read the stored version last, only the header is read: the
        entries of a version never change, so the remembered record is that version.
        """
        with self._lock:
            cached = self._records.get(run_id)
        if cached is not None:
            answer = self._call(
                "reading run " + run_id,
                self._db().get_item,
                TableName=self.table_name,
                Key={t.PK: ri.s(run_id), t.SK: ri.s(ri.HEADER_SK)},
                ProjectionExpression="version",
                ConsistentRead=True,
            )
            stored = answer.get("Item", {}).get("version", {}).get("N")
            if stored is not None and int(stored) == cached.version:
                return cached.model_copy(deep=True)
        loaded = self._load(run_id)
        if loaded is None:
            self._forget(run_id)
            return None
        record, snapshot = loaded
        self._remember(run_id, snapshot, record)
        return record

    def _load(self, run_id: str) -> tuple[RunRecord, ri.Snapshot] | None:
        header: dict[str, Any] | None = None
        part_items: list[dict[str, Any]] = []
        bundle_items: list[dict[str, Any]] = []
        params: dict[str, Any] = {
            "TableName": self.table_name,
            "KeyConditionExpression": "#pk = :pk",
            "ExpressionAttributeNames": {"#pk": t.PK},
            "ExpressionAttributeValues": {":pk": ri.s(run_id)},
            "ConsistentRead": True,
        }
        while True:
            page = self._call("reading run " + run_id, self._db().query, **params)
            for item in page.get("Items", []):
                sk = item[t.SK]["S"]
                if sk == ri.HEADER_SK:
                    header = item
                elif sk.startswith(ri.PART_PREFIX):
                    part_items.append(item)
                elif sk.startswith(ri.BUNDLE_PREFIX):
                    bundle_items.append(item)
            if "LastEvaluatedKey" not in page:
                break
            params["ExclusiveStartKey"] = page["LastEvaluatedKey"]
        if header is None:
            return None
        version = int(header["version"]["N"])
        snapshot = ri.Snapshot(version=version, next_ordinal=int(header["nextOrdinal"]["N"]))
        # Highest version wins per part: later part items supersede older bundle entries.
        latest: dict[ri.PartId, tuple[int, dict[str, Any]]] = {}
        for item in bundle_items:
            item_version = int(item["v"]["N"])
            snapshot.bundle_sks.append(item[t.SK]["S"])
            if item_version > version:
                continue
            for entry in json.loads(item["d"]["S"]):
                part = (entry["s"], entry["k"])
                if part not in latest or latest[part][0] < item_version:
                    latest[part] = (item_version, entry)
        for item in part_items:
            item_version = int(item["v"]["N"])
            if item_version > version:
                continue
            part = (item["sec"]["S"], item["key"]["S"])
            entry = {
                "o": int(item["o"]["N"]),
                "h": item["h"]["S"],
                "d": item["d"]["S"] if "d" in item else None,
                "r": item["ref"]["S"] if "ref" in item else None,
                "x": bool(item.get("del", {}).get("BOOL", False)),
            }
            if part not in latest or latest[part][0] <= item_version:
                latest[part] = (item_version, entry)
        triples: list[tuple[ri.PartId, int, Any]] = []
        for part, (_, entry) in latest.items():
            ref = entry.get("r")
            snapshot.parts[part] = ri.PartState(
                hash=entry["h"], ordinal=entry["o"], ref=ref, deleted=bool(entry.get("x"))
            )
            if entry.get("x"):
                continue
            text = entry.get("d")
            if ref is not None:
                text = self._payload_store().get(ref).decode("utf-8")
            triples.append((part, entry["o"], json.loads(text) if text is not None else None))
        doc = self._header_doc(header)
        record = RunRecord.from_document(ri.join_document(doc, triples))
        return record, snapshot

    def _header_doc(self, header: dict[str, Any]) -> dict[str, Any]:
        if "docRef" in header:
            text = self._payload_store().get(header["docRef"]["S"]).decode("utf-8")
        else:
            text = header["doc"]["S"]
        doc: dict[str, Any] = json.loads(text)
        doc["version"] = int(header["version"]["N"])
        return doc

    # ---- writes ---------------------------------------------------------------------------

    def try_insert(self, record: RunRecord) -> RunRecord:
        """Insert ``record`` at version 1.

        Raises:
            RunAlreadyExistsError: A run with this id exists; ``existing`` is that run.
        """
        stored = record.model_copy(update={"version": 1})
        snapshot = ri.Snapshot(version=0)
        for _ in range(3):
            try:
                new_snapshot = self._write(stored, snapshot, insert=True)
            except _ConditionFailed as failed:
                existing = self._existing_from(record.id, failed.item)
                if existing is None:
                    continue  # deleted between our write and our read: try again
                raise RunAlreadyExistsError(existing=existing) from None
            except _Contended:
                continue
            self._remember(record.id, new_snapshot, stored)
            return stored
        raise StaleRunError(f"run {record.id} kept changing while it was being inserted")

    def _existing_from(self, run_id: str, old: dict[str, Any] | None) -> RunRecord | None:
        if old is not None and int(old.get("nParts", {}).get("N", "1")) == 0:
            return RunRecord.from_document(ri.join_document(self._header_doc(old), []))
        return self.get(run_id)

    def save(self, record: RunRecord, *, expected_version: int) -> RunRecord:
        """Store ``record`` as version ``expected_version + 1`` if the stored one matches.

        Raises:
            StaleRunError: The stored run is at another version (or is being written).
        """
        with self._lock:
            snapshot = self._snapshots.get(record.id)
        if snapshot is None or snapshot.version != expected_version:
            loaded = self._load(record.id)
            if loaded is None or loaded[1].version != expected_version:
                stored = None if loaded is None else loaded[1].version
                raise StaleRunError(
                    f"run {record.id} is at version {stored}, not {expected_version}"
                )
            snapshot = loaded[1]
        saved = record.model_copy(update={"version": expected_version + 1})
        try:
            new_snapshot = self._write(saved, snapshot, insert=False)
        except (_ConditionFailed, _Contended) as exc:
            self._forget(record.id)
            found = exc.version if isinstance(exc, _ConditionFailed) else None
            raise StaleRunError(
                f"run {record.id} is at version {found if found is not None else 'unknown'}, "
                f"not {expected_version}"
            ) from None
        self._remember(record.id, new_snapshot, saved)
        return saved

    def _write(self, record: RunRecord, old: ri.Snapshot, *, insert: bool) -> ri.Snapshot:
        version = record.version
        header_doc, parts = ri.split_document(record.to_document())
        expires = self._expiry(record)
        new = ri.Snapshot(
            version=version, next_ordinal=old.next_ordinal, bundle_sks=list(old.bundle_sks)
        )
        changed: list[tuple[ri.PartId, str, ri.PartState]] = []
        for part, text in parts.items():
            digest = ri.digest(text)
            known = old.parts.get(part)
            if known is not None and not known.deleted and known.hash == digest:
                new.parts[part] = known
                continue
            ordinal = known.ordinal if known is not None and not known.deleted else None
            if ordinal is None:
                ordinal = new.next_ordinal
                new.next_ordinal += 1
            ref = None
            if len(text.encode("utf-8")) > ri.VALUE_BUDGET:
                ref = self._offload(record.id, part, text)
            state = ri.PartState(hash=digest, ordinal=ordinal, ref=ref)
            new.parts[part] = state
            changed.append((part, text, state))
        removed = [p for p, s in old.parts.items() if p not in parts and not s.deleted]
        header = self._header_item(record, header_doc, expires, new, live=len(parts))
        puts = [self._part_item(record.id, version, p, txt, st, expires) for p, txt, st in changed]
        actions: list[dict[str, Any]] = [self._header_action(header, insert, old.version)]
        tombstones = bool(old.bundle_sks)
        for part in removed:
            if tombstones:
                state = ri.PartState(hash="", ordinal=old.parts[part].ordinal, deleted=True)
                new.parts[part] = state
                puts.append(self._part_item(record.id, version, part, None, state, expires))
            else:
                actions.append(
                    {
                        "Delete": {
                            "TableName": self.table_name,
                            "Key": {t.PK: ri.s(record.id), t.SK: ri.s(ri.part_sk(part))},
                        }
                    }
                )
        actions.extend({"Put": {"TableName": self.table_name, "Item": item}} for item in puts)
        if len(actions) > _TRANSACTION_ITEMS or _actions_size(actions) > _TRANSACTION_BYTES:
            actions = self._bundled(record.id, header, insert, old, changed, removed, expires)
            new.bundle_sks.extend(a["Put"]["Item"][t.SK]["S"] for a in actions[1:])
            for part in removed:
                new.parts[part] = ri.PartState(hash="", ordinal=0, deleted=True)
        self._transact(record.id, actions)
        if expires is not None and self._expire_entries:
            self._expire_untouched(record.id, new, {p for p, _, _ in changed}, parts, expires)
        return new

    def _bundled(
        self,
        run_id: str,
        header: dict[str, Any],
        insert: bool,
        old: ri.Snapshot,
        changed: list[tuple[ri.PartId, str, ri.PartState]],
        removed: list[ri.PartId],
        expires: int | None,
    ) -> list[dict[str, Any]]:
        """Pack a large change into bundle items (one transaction of at most 100 items)."""
        version = int(header["version"]["N"])
        entries: list[dict[str, Any]] = []
        for (section, key), text, state in changed:
            entry: dict[str, Any] = {"s": section, "k": key, "o": state.ordinal, "h": state.hash}
            if state.ref is not None:
                entry["r"] = state.ref
            else:
                entry["d"] = text
            entries.append(entry)
        entries.extend(
            {"s": section, "k": key, "o": 0, "h": "", "x": True} for section, key in removed
        )
        bundles: list[list[dict[str, Any]]] = [[]]
        size = 0
        for entry in entries:
            entry_size = len(json.dumps(entry, ensure_ascii=False).encode("utf-8")) + 1
            if bundles[-1] and size + entry_size > ri.ITEM_BUDGET:
                bundles.append([])
                size = 0
            bundles[-1].append(entry)
            size += entry_size
        header["bundles"] = ri.n(len(old.bundle_sks) + len(bundles))
        actions = [self._header_action(header, insert, old.version)]
        for index, bundle in enumerate(bundles):
            item = {
                t.PK: ri.s(run_id),
                t.SK: ri.s(ri.bundle_sk(version, index)),
                "v": ri.n(version),
                "d": ri.s(json.dumps(bundle, separators=(",", ":"), ensure_ascii=False)),
            }
            if expires is not None:
                item[t.TTL_ATTRIBUTE] = ri.n(expires)
            actions.append({"Put": {"TableName": self.table_name, "Item": item}})
        if len(actions) > _TRANSACTION_ITEMS or _actions_size(actions) > _TRANSACTION_BYTES:
            raise ValidationError(
                f"one save of run {run_id} changes {len(entries)} entries, more than one "
                "DynamoDB transaction can hold; offload large values to the payload store"
            )
        return actions

    def _header_action(self, header: dict[str, Any], insert: bool, old: int) -> dict[str, Any]:
        put: dict[str, Any] = {
            "TableName": self.table_name,
            "Item": header,
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        }
        if insert:
            put["ConditionExpression"] = "attribute_not_exists(#pk)"
            put["ExpressionAttributeNames"] = {"#pk": t.PK}
        else:
            put["ConditionExpression"] = "#v = :v"
            put["ExpressionAttributeNames"] = {"#v": "version"}
            put["ExpressionAttributeValues"] = {":v": ri.n(old)}
        return {"Put": put}

    def _header_item(
        self,
        record: RunRecord,
        header_doc: dict[str, Any],
        expires: int | None,
        snapshot: ri.Snapshot,
        *,
        live: int,
    ) -> dict[str, Any]:
        text = ri.encode_json(header_doc)
        item: dict[str, Any] = {
            t.PK: ri.s(record.id),
            t.SK: ri.s(ri.HEADER_SK),
            "runId": ri.s(record.id),
            "workflowId": ri.s(record.workflow_id),
            "status": ri.s(record.status),
            "environment": ri.s(record.environment),
            "tags": {"L": [ri.s(tag) for tag in record.tags]},
            "startedAt": ri.n(record.started_at),
            "version": ri.n(record.version),
            "nextOrdinal": ri.n(snapshot.next_ordinal),
            "nParts": ri.n(live),
            "bundles": ri.n(len(snapshot.bundle_sks)),
            t.TIME_KEY: ri.s(time_key(record.started_at, record.id)),
            t.WORKFLOW_KEY: ri.s(record.workflow_id),
            t.STATUS_KEY: ri.s(record.status),
            t.ENVIRONMENT_KEY: ri.s(record.environment),
        }
        if len(text.encode("utf-8")) > ri.VALUE_BUDGET:
            item["docRef"] = ri.s(self._offload(record.id, ("header", ""), text))
        else:
            item["doc"] = ri.s(text)
        if record.wake_at is not None:
            item[t.WAKE_SHARD_KEY] = ri.s(wake_shard(record.id))
            item[t.WAKE_AT] = ri.n(record.wake_at)
        if expires is not None:
            item[t.TTL_ATTRIBUTE] = ri.n(expires)
        return item

    def _part_item(
        self,
        run_id: str,
        version: int,
        part: ri.PartId,
        text: str | None,
        state: ri.PartState,
        expires: int | None,
    ) -> dict[str, Any]:
        item: dict[str, Any] = {
            t.PK: ri.s(run_id),
            t.SK: ri.s(ri.part_sk(part)),
            "sec": ri.s(part[0]),
            "key": ri.s(part[1]),
            "o": ri.n(state.ordinal),
            "v": ri.n(version),
            "h": ri.s(state.hash),
        }
        if state.deleted:
            item["del"] = {"BOOL": True}
        elif state.ref is not None:
            item["ref"] = ri.s(state.ref)
        elif text is not None:
            item["d"] = ri.s(text)
        if expires is not None:
            item[t.TTL_ATTRIBUTE] = ri.n(expires)
        return item

    def _expiry(self, record: RunRecord) -> int | None:
        if record.status not in TERMINAL_STATUSES:
            return None
        ended = record.completed_at if record.completed_at is not None else self._clock.now_ms()
        return ended // 1000 + self.retention_days * 86_400

    def _expire_untouched(
        self,
        run_id: str,
        snapshot: ri.Snapshot,
        written: set[ri.PartId],
        parts: dict[ri.PartId, str],
        expires: int,
    ) -> None:
        """Stamp the TTL on entry items written before the run finished (best effort)."""
        items = [
            self._part_item(run_id, snapshot.version, part, parts.get(part), state, expires)
            for part, state in snapshot.parts.items()
            if part not in written
        ]
        try:
            for start in range(0, len(items), 25):
                requests = [{"PutRequest": {"Item": item}} for item in items[start : start + 25]]
                pending: dict[str, Any] = {self.table_name: requests}
                for _ in range(5):
                    answer = self._db().batch_write_item(RequestItems=pending)
                    pending = dict(answer.get("UnprocessedItems") or {})
                    if not pending:
                        break
            for sk in snapshot.bundle_sks:
                self._db().update_item(
                    TableName=self.table_name,
                    Key={t.PK: ri.s(run_id), t.SK: ri.s(sk)},
                    UpdateExpression="SET #ttl = :ttl",
                    ExpressionAttributeNames={"#ttl": t.TTL_ATTRIBUTE},
                    ExpressionAttributeValues={":ttl": ri.n(expires)},
                )
        except Exception as exc:
            if not is_aws_error(exc):
                raise
            _log.warning("could not set the expiry of every entry of run %s: %s", run_id, exc)

    def _offload(self, run_id: str, part: ri.PartId, text: str) -> str:
        if self._payloads is None:
            raise ValidationError(
                f"entry {part[0]}:{part[1]} of run {run_id} is {len(text.encode())} bytes, "
                "too large for a DynamoDB item; configure a payload store"
            )
        return self._payloads.put(text.encode("utf-8"))

    def _payload_store(self) -> PayloadStore:
        if self._payloads is None:
            raise ValidationError("this run has entries in the payload store; configure one")
        return self._payloads

    def _transact(self, run_id: str, actions: list[dict[str, Any]]) -> None:
        try:
            self._db().transact_write_items(TransactItems=actions)  # type: ignore[arg-type]
        except Exception as exc:
            if not is_aws_error(exc) or error_code(exc) != "TransactionCanceledException":
                reraise(exc, f"writing run {run_id}")
            reasons = getattr(exc, "response", {}).get("CancellationReasons", [])
            first = reasons[0] if reasons else {}
            if first.get("Code") == "ConditionalCheckFailed":
                old = first.get("Item")
                raise _ConditionFailed(old) from None
            if any(r.get("Code") == "TransactionConflict" for r in reasons):
                raise _Contended() from None
            reraise(exc, f"writing run {run_id}")

    # ---- snapshots ------------------------------------------------------------------------

    def _remember(self, run_id: str, snapshot: ri.Snapshot, record: RunRecord) -> None:
        with self._lock:
            self._snapshots[run_id] = snapshot
            self._snapshots.move_to_end(run_id)
            while len(self._snapshots) > _SNAPSHOTS:
                self._snapshots.popitem(last=False)
            self._records[run_id] = record.model_copy(deep=True)
            self._records.move_to_end(run_id)
            while len(self._records) > _RECORDS:
                self._records.popitem(last=False)

    def _forget(self, run_id: str) -> None:
        with self._lock:
            self._snapshots.pop(run_id, None)
            self._records.pop(run_id, None)

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

    def _header_record(self, item: dict[str, Any]) -> RunRecord:
        return RunRecord.from_document(ri.join_document(self._header_doc(item), []))

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


class _Contended(Exception):
    pass


def _actions_size(actions: list[dict[str, Any]]) -> int:
    total = 0
    for action in actions:
        item = action.get("Put", {}).get("Item")
        total += ri.item_size(item) if item is not None else 100
    return total
