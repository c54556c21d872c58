"""A run's header item: its listing and index attributes, the compressed header document, and
the header fields too large to rewrite on every save, held in the payload store.

A field still holding the object stored last keeps its payload reference without being
encoded again, so a large input or output is uploaded once, not by every save.
"""

from __future__ import annotations

import json
import secrets
from typing import Any

from relayflow.adapters.aws import attributes, compression, tables
from relayflow.adapters.aws.runstore import _codec, _keys, _pages
from relayflow.adapters.aws.runstore._snapshot import RunSnapshot, StoredField
from relayflow.core.record import RunRecord
from relayflow.core.versions import pinned_function
from relayflow.core.views import UnavailableValue
from relayflow.errors import ValidationError
from relayflow.payloads import UNREADABLE_PAYLOADS
from relayflow.ports import PayloadStore

#: Largest compressed header document kept in the header item.
HEADER_BUDGET = attributes.ITEM_BUDGET - 10_000
_MISSING = object()


def wake_index(record: RunRecord, old: RunSnapshot, now: int) -> int | None:
    """The wake time the header gives the sweeper's index.

    A run saved while a holder has its lease to run an invocation keeps the entry it had:
    the sweeper skips runs whose lease is live and recovers them once it expired, so the
    entry changes only when the run parks or ends (one index write per wait, not three).

    A run that parks to wake within one bucket from now keeps an entry no later than its
    wake time too: the sweeper reads every bucket up to the current one, so it still finds
    the run by its wake time, and reads its header on a few more passes at most (those
    before the wake's bucket begins). A run of short sleeps so writes its index entry once
    instead of at every bucket it crosses.
    """
    if record.is_terminal:
        return None
    kept = old.wake_index
    if record.status == "running" and record.lease is not None and kept is not None:
        return kept
    wake = record.wake_at
    if (
        wake is not None
        and kept is not None
        and kept <= wake
        and wake - now < tables.WAKE_BUCKET_MS
    ):
        return kept
    return wake


def due_at(record: RunRecord, index_wake: int) -> int:
    """When the sweeper should look at the run: its wake time, and never before its lease
    ends. The header holds it exactly; the index keeps only its bucket (and, for a run in
    flight, the bucket it had), so a run whose holder is alive is never due for the sweeper
    however many such runs share a bucket."""
    due = index_wake if record.wake_at is None else record.wake_at
    if record.lease is not None:
        due = max(due, record.lease.expires_at)
    return due


class HeaderCodec:
    """Builds and reads header items.

    Args:
        payloads: Holds header fields over ``_codec.FIELD_BUDGET`` (without one they stay
            in the item while it fits).
    """

    def __init__(self, payloads: PayloadStore | None) -> None:
        self._payloads = payloads

    def document(self, record: RunRecord, old: RunSnapshot) -> tuple[bytes, dict[str, StoredField]]:
        """The compressed header document of ``record`` and its fields in the payload store."""
        fields: dict[str, StoredField] = {}
        for key, stored in old.fields.items():
            if getattr(record, _codec.FIELD_OF_KEY.get(key, key), _MISSING) is stored.obj:
                fields[key] = stored
        data = _codec.header_json(record, fields)
        if len(data) > _codec.FIELD_BUDGET and self._payloads is not None:
            doc: dict[str, Any] = json.loads(data)
            for key, value in list(doc.items()):
                encoded = attributes.encode(value)
                if len(encoded) <= _codec.FIELD_BUDGET:
                    continue
                hashed = _codec.digest(encoded)
                prior = old.fields.get(key)
                ref = (
                    prior.ref
                    if prior is not None and prior.digest == hashed
                    else self._payloads.put(encoded)
                )
                obj = getattr(record, _codec.FIELD_OF_KEY.get(key, key), _MISSING)
                fields[key] = StoredField(obj, hashed, ref)
                del doc[key]
            data = attributes.encode(doc)
        packed = compression.pack(data)
        if len(packed) > HEADER_BUDGET:
            raise ValidationError(
                f"run {record.id} has a header of {len(data)} bytes, too large for a DynamoDB "
                "item; configure a payload store"
            )
        return packed, fields

    def item(
        self,
        record: RunRecord,
        packed: bytes,
        state: RunSnapshot,
        expires: int | None,
    ) -> dict[str, Any]:
        """The header item of ``record`` at ``state`` (its head, fields and expiry mark)."""
        item: dict[str, Any] = {
            tables.PK: attributes.s(record.id),
            tables.SK: attributes.s(_keys.HEADER_SK),
            "status": attributes.s(record.status),
            "version": attributes.n(record.version),
            tables.TIME_KEY: attributes.s(_keys.time_key(record.started_at, record.id)),
            tables.WORKFLOW_KEY: attributes.s(record.workflow_id),
            tables.STATUS_KEY: attributes.s(_keys.status_partition(record.status)),
            tables.ENVIRONMENT_KEY: attributes.s(record.environment),
            "z": {"B": packed},
            # Tells this write from any other, so a retried request can recognise its own.
            "w": attributes.s(secrets.token_hex(4)),
        }
        if record.tags:
            item["tags"] = {"L": [attributes.s(tag) for tag in record.tags]}
        if state.fields:
            item["refs"] = {"M": {key: attributes.s(f.ref) for key, f in state.fields.items()}}
        if state.head is not None:
            item["head"] = attributes.s(state.head)
        if state.inline:
            item["i"] = {"B": compression.pack(_pages.body(state.inline))}
        if state.wake_index is not None:
            item[tables.WAKE_SHARD_KEY] = attributes.s(_keys.wake_shard(record.id))
            item[tables.WAKE_AT] = attributes.n(due_at(record, state.wake_index))
            item[tables.WAKE_BUCKET] = attributes.n(
                state.wake_index - state.wake_index % tables.WAKE_BUCKET_MS
            )
        pinned = pinned_function(record)
        if pinned is not None:
            item[tables.CODE_VERSION_KEY] = attributes.s(pinned)
            item[tables.CODE_VERSION_END] = attributes.s(_keys.code_version_end(record))
        if expires is not None:
            item[tables.TTL_ATTRIBUTE] = attributes.n(expires)
        if state.expiry_pending:
            item["xp"] = {"BOOL": True}
        return item

    def read(
        self,
        header: dict[str, Any],
        *,
        values: bool = True,
        unavailable: list[UnavailableValue] | None = None,
    ) -> tuple[dict[str, Any], dict[str, tuple[bytes, str]]]:
        """The header document of a header item, and its fields held in the payload store
        (content hash and reference, by document key).

        Args:
            header: The header item.
            values: Read the fields held in the payload store (without, they are left out
                and the document has their defaults: enough to list or sweep the run).
            unavailable: Collects the fields the payload store cannot give, which are then
                left out, instead of raising (a view of the run, never to be saved).

        Raises:
            PayloadNotFoundError: A field is not in the payload store (without
                ``unavailable``).
        """
        if "z" not in header:
            raise ValidationError(
                f"run {header.get(tables.PK, {}).get('S')} is stored in a layout this version "
                "of relayflow does not read (written before pages); finish it with the "
                "version that started it"
            )
        doc: dict[str, Any] = json.loads(compression.unpack(header["z"]["B"]))
        # Older headers hold these in the document too; the attributes are the same values.
        doc.setdefault("id", header[tables.PK]["S"])
        doc.setdefault("workflowId", header[tables.WORKFLOW_KEY]["S"])
        doc.setdefault("status", header["status"]["S"])
        doc.setdefault("environment", header[tables.ENVIRONMENT_KEY]["S"])
        doc.setdefault("tags", [tag["S"] for tag in header.get("tags", {}).get("L", [])])
        doc.setdefault("startedAt", int(header[tables.TIME_KEY]["S"].split("#", 1)[0]))
        fields: dict[str, tuple[bytes, str]] = {}
        refs: dict[str, Any] = header.get("refs", {}).get("M", {}) if values else {}
        for key, ref in refs.items():
            try:
                data = self._payload_store().get(ref["S"])
            except UNREADABLE_PAYLOADS as exc:
                if unavailable is None:
                    raise
                unavailable.append(UnavailableValue(path=f"/{key}", reason=exc.code, ref=ref["S"]))
                continue
            doc[key] = json.loads(data)
            fields[key] = (_codec.digest(data), ref["S"])
        doc["version"] = int(header["version"]["N"])
        if tables.DELIVERY_MARK in header:
            doc["dirty"] = doc["deliveryMark"] = True
        return doc, fields

    def record(self, header: dict[str, Any]) -> RunRecord:
        """The record of a header item alone (its per-entry collections empty)."""
        return RunRecord.from_document(_codec.join_document(self.read(header)[0], []))

    def bare(self, header: dict[str, Any]) -> RunRecord:
        """The record of a header item without the fields held in the payload store (at
        their defaults), read with no payload store request: enough to sweep the run."""
        doc = self.read(header, values=False)[0]
        return RunRecord.from_document(_codec.join_document(doc, []))

    def listed(self, header: dict[str, Any]) -> tuple[RunRecord, list[UnavailableValue]]:
        """The record of a header item, and the fields the payload store no longer gives
        (left out): a listing answers whatever the payload store lost."""
        unavailable: list[UnavailableValue] = []
        doc = self.read(header, unavailable=unavailable)[0]
        return RunRecord.from_document(_codec.join_document(doc, [])), unavailable

    def stored_fields(
        self, record: RunRecord, fields: dict[str, tuple[bytes, str]]
    ) -> dict[str, StoredField]:
        """What the store remembers of the fields :meth:`read` found in the payload store."""
        return {
            key: StoredField(
                getattr(record, _codec.FIELD_OF_KEY.get(key, key), _MISSING), hashed, ref
            )
            for key, (hashed, ref) in fields.items()
        }

    def _payload_store(self) -> PayloadStore:
        if self._payloads is None:
            raise ValidationError("this run has values in the payload store; configure one")
        return self._payloads
