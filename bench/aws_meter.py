"""Counts AWS requests made through a boto3 session and prices DynamoDB writes and reads.

Requests are counted with botocore's ``before-call`` event, by service and operation. moto
reports a fixed consumed capacity, so write and read units are computed here from the items
themselves with DynamoDB's documented rules: an item's size is the UTF-8 length of its
attribute names plus their values; a write costs one unit per started KB of the larger of the
old and the new item (two in a transaction); a strongly consistent read costs one unit per
started 4 KB (a query sums its items first). Global secondary index writes are priced apart:
an index entry (keys plus projected attributes) is written when it appears, disappears,
changes key (delete plus put) or changes a projected attribute.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from relayflow.adapters.aws.attributes import item_size

Item = dict[str, dict[str, Any]]

_SET_CLAUSE = re.compile(r"^\s*SET\s+(.*)$", re.IGNORECASE)


def write_units(size: int) -> int:
    """Write units of one non-transactional write of ``size`` bytes (1 per started KB)."""
    return max(1, math.ceil(size / 1024))


def read_units(size: int, *, consistent: bool) -> float:
    """Read units of reading ``size`` bytes (1 per started 4 KB, half if eventually consistent)."""
    units = max(1, math.ceil(size / 4096))
    return float(units) if consistent else units / 2


@dataclass(frozen=True)
class IndexSpec:
    """One global secondary index: its key attributes and projected attributes."""

    name: str
    keys: tuple[str, ...]
    projection: str
    projected: tuple[str, ...] = ()


@dataclass(frozen=True)
class TableSpec:
    """The key attributes and indexes of one table."""

    keys: tuple[str, ...]
    indexes: tuple[IndexSpec, ...] = ()

    @classmethod
    def from_create_args(cls, args: Mapping[str, Any]) -> TableSpec:
        """Read a ``create_table`` argument dict (as ``relayflow.adapters.aws.tables`` has)."""
        keys = tuple(k["AttributeName"] for k in args["KeySchema"])
        indexes = tuple(
            IndexSpec(
                name=gsi["IndexName"],
                keys=tuple(k["AttributeName"] for k in gsi["KeySchema"]),
                projection=gsi["Projection"]["ProjectionType"],
                projected=tuple(gsi["Projection"].get("NonKeyAttributes", ())),
            )
            for gsi in args.get("GlobalSecondaryIndexes", ())
        )
        return cls(keys=keys, indexes=indexes)

    def key_of(self, item: Mapping[str, Any]) -> tuple[str, ...]:
        """A hashable primary key of ``item``."""
        return tuple(repr(item.get(name)) for name in self.keys)

    def index_entry(self, index: IndexSpec, item: Item | None) -> Item | None:
        """The entry ``item`` has in ``index`` (None when it lacks an index key: sparse)."""
        if item is None or any(name not in item for name in index.keys):
            return None
        if index.projection == "ALL":
            return dict(item)
        names = set(index.keys) | set(self.keys)
        if index.projection == "INCLUDE":
            names |= set(index.projected)
        return {name: value for name, value in item.items() if name in names}


@dataclass(frozen=True)
class PricedWrite:
    """One item write as the meter priced it (for tracing where write units go)."""

    operation: str
    table: str
    key: tuple[str, ...]
    old_size: int
    new_size: int | None
    table_units: int
    index_units: dict[str, int]
    failed: bool


@dataclass
class Tally:
    """What the metered clients did (since the meter was created or last reset)."""

    calls: Counter[str] = field(default_factory=Counter)
    units_by_operation: Counter[str] = field(default_factory=Counter)
    table_write_units: int = 0
    index_write_units: int = 0
    read_units: float = 0.0
    largest_item: int = 0
    s3_bytes_put: int = 0

    def count(self, *names: str) -> int:
        """Calls of the given ``service.Operation`` names (or ``service.*`` for all of one)."""
        total = 0
        for name in names:
            if name.endswith(".*"):
                prefix = name[:-1]
                total += sum(n for key, n in self.calls.items() if key.startswith(prefix))
            else:
                total += self.calls[name]
        return total

    @property
    def dynamodb_writes(self) -> int:
        """Write requests to DynamoDB (a transaction or a batch counts once)."""
        return self.count(
            "dynamodb.PutItem",
            "dynamodb.UpdateItem",
            "dynamodb.DeleteItem",
            "dynamodb.TransactWriteItems",
            "dynamodb.BatchWriteItem",
        )

    @property
    def dynamodb_reads(self) -> int:
        """Read requests to DynamoDB (each page of a query counts once)."""
        return self.count(
            "dynamodb.GetItem",
            "dynamodb.Query",
            "dynamodb.Scan",
            "dynamodb.BatchGetItem",
            "dynamodb.TransactGetItems",
        )

    @property
    def write_units(self) -> int:
        """Table plus index write units."""
        return self.table_write_units + self.index_write_units

    def copy(self) -> Tally:
        """An independent copy."""
        return Tally(
            calls=Counter(self.calls),
            units_by_operation=Counter(self.units_by_operation),
            table_write_units=self.table_write_units,
            index_write_units=self.index_write_units,
            read_units=self.read_units,
            largest_item=self.largest_item,
            s3_bytes_put=self.s3_bytes_put,
        )


class AwsMeter:
    """Registers botocore hooks on a boto3 session and keeps a :class:`Tally`.

    Register before the session creates its clients (clients copy the session's hooks).
    A shadow copy of every item written through the session gives the "old" item that
    DynamoDB prices overwrites, deletes and index updates with.

    Args:
        session: The boto3 session (``boto3.Session``) whose clients are metered.
        tables: The schema of each DynamoDB table by name.
    """

    def __init__(
        self,
        session: Any,
        tables: Mapping[str, TableSpec],
        on_write: Callable[[PricedWrite], None] | None = None,
    ) -> None:
        self.tables = dict(tables)
        self.tally = Tally()
        self.on_write = on_write
        self._operation = ""
        self._shadow: dict[str, dict[tuple[str, ...], Item]] = {name: {} for name in tables}
        events = session.events
        events.register("before-parameter-build", self._keep_params)
        events.register("before-call", self._before_call)
        events.register("after-call", self._after_call)

    def reset(self) -> Tally:
        """Start a new tally; returns the one that ends."""
        ended, self.tally = self.tally, Tally()
        return ended

    # ---- hooks -----------------------------------------------------------------------------

    def _keep_params(self, params: Any, context: Any, **kwargs: Any) -> None:
        if isinstance(context, dict):
            context["bench_params"] = dict(params)

    def _before_call(self, event_name: str, **kwargs: Any) -> None:
        _, service, operation = event_name.split(".", 2)
        self.tally.calls[f"{service}.{operation}"] += 1

    def _after_call(self, event_name: str, parsed: Any, context: Any, **kwargs: Any) -> None:
        _, service, operation = event_name.split(".", 2)
        params = context.get("bench_params", {}) if isinstance(context, dict) else {}
        failed = isinstance(parsed, dict) and "Error" in parsed
        if service == "dynamodb":
            before = self.tally.table_write_units
            self._dynamodb(operation, params, parsed if isinstance(parsed, dict) else {}, failed)
            if self.tally.table_write_units > before:
                self.tally.units_by_operation[operation] += self.tally.table_write_units - before
        elif service == "s3" and operation == "PutObject" and not failed:
            body = params.get("Body", b"")
            self.tally.s3_bytes_put += len(body) if isinstance(body, bytes | str) else 0

    # ---- DynamoDB pricing ------------------------------------------------------------------

    def _dynamodb(self, operation: str, params: dict[str, Any], parsed: Any, failed: bool) -> None:
        self._operation = operation
        if operation == "PutItem":
            self._put(params["TableName"], params["Item"], failed, transactional=False)
        elif operation == "DeleteItem":
            self._delete(params["TableName"], params["Key"], failed, transactional=False)
        elif operation == "UpdateItem":
            self._update(params, failed, transactional=False)
        elif operation == "BatchWriteItem":
            for table, requests in params.get("RequestItems", {}).items():
                unprocessed = parsed.get("UnprocessedItems", {}).get(table, [])
                for request in requests:
                    if request in unprocessed:
                        continue
                    if "PutRequest" in request:
                        self._put(table, request["PutRequest"]["Item"], failed, False)
                    else:
                        self._delete(table, request["DeleteRequest"]["Key"], failed, False)
        elif operation == "TransactWriteItems":
            for action in params.get("TransactItems", []):
                ((kind, body),) = action.items()
                if kind == "Put":
                    self._put(body["TableName"], body["Item"], failed, transactional=True)
                elif kind == "Delete":
                    self._delete(body["TableName"], body["Key"], failed, transactional=True)
                elif kind == "Update":
                    self._update(body, failed, transactional=True)
                else:
                    old = self._old(body["TableName"], body["Key"])
                    self.tally.table_write_units += 2 * write_units(item_size(old or {}))
        elif operation in ("GetItem", "TransactGetItems", "BatchGetItem", "Query", "Scan"):
            self._reads(operation, params, parsed)

    def _old(self, table: str, item_or_key: Mapping[str, Any]) -> Item | None:
        spec = self.tables.get(table)
        if spec is None:
            return None
        return self._shadow[table].get(spec.key_of(item_or_key))

    def _write(
        self,
        table: str,
        key: Mapping[str, Any],
        new: Item | None,
        failed: bool,
        transactional: bool,
    ) -> None:
        old = self._old(table, key)
        size = max(item_size(new or {}), item_size(old or {}))
        units = write_units(size)
        self.tally.table_write_units += 2 * units if transactional else units
        if new is not None:
            self.tally.largest_item = max(self.tally.largest_item, item_size(new))
        spec = self.tables.get(table)
        by_index = {} if failed or spec is None else _units_by_index(spec, old, new)
        if self.on_write is not None:
            self.on_write(
                PricedWrite(
                    operation=self._operation,
                    table=table,
                    key=tuple(str(v) for v in key.values()) if spec is None else spec.key_of(key),
                    old_size=item_size(old or {}),
                    new_size=None if new is None else item_size(new),
                    table_units=2 * units if transactional else units,
                    index_units=by_index,
                    failed=failed,
                )
            )
        if failed or spec is None:
            return
        self.tally.index_write_units += sum(by_index.values())
        if new is None:
            self._shadow[table].pop(spec.key_of(key), None)
        else:
            self._shadow[table][spec.key_of(key)] = dict(new)

    def _put(self, table: str, item: Item, failed: bool, transactional: bool) -> None:
        self._write(table, item, dict(item), failed, transactional)

    def _delete(self, table: str, key: Item, failed: bool, transactional: bool) -> None:
        self._write(table, key, None, failed, transactional)

    def _update(self, body: Mapping[str, Any], failed: bool, transactional: bool) -> None:
        table, key = body["TableName"], body["Key"]
        new = dict(self._old(table, key) or key)
        new.update(_set_assignments(body))
        self._write(table, key, new, failed, transactional)

    def _reads(self, operation: str, params: Mapping[str, Any], parsed: Any) -> None:
        consistent = bool(params.get("ConsistentRead", False))
        if operation == "GetItem":
            # A projection does not make a read cheaper: the whole stored item is billed.
            key = params.get("Key", {})
            stored = self._old(str(params.get("TableName")), key) or parsed.get("Item", {})
            self.tally.read_units += read_units(item_size(stored), consistent=consistent)
        elif operation in ("Query", "Scan"):
            size = sum(item_size(item) for item in parsed.get("Items", []))
            self.tally.read_units += read_units(size, consistent=consistent)
        elif operation == "BatchGetItem":
            for table, items in parsed.get("Responses", {}).items():
                strong = bool(params.get("RequestItems", {}).get(table, {}).get("ConsistentRead"))
                for item in items:
                    self.tally.read_units += read_units(item_size(item), consistent=strong)
        else:
            for response in parsed.get("Responses", []):
                self.tally.read_units += 2 * read_units(
                    item_size(response.get("Item", {})), consistent=True
                )


def _units_by_index(spec: TableSpec, old: Item | None, new: Item | None) -> dict[str, int]:
    units: dict[str, int] = {}
    for index in spec.indexes:
        before = spec.index_entry(index, old)
        after = spec.index_entry(index, new)
        if before is None and after is None:
            continue
        if before is None and after is not None:
            units[index.name] = write_units(item_size(after))
        elif after is None and before is not None:
            units[index.name] = write_units(item_size(before))
        elif before is not None and after is not None:
            if any(before.get(k) != after.get(k) for k in index.keys):
                units[index.name] = write_units(item_size(before)) + write_units(item_size(after))
            elif before != after:
                units[index.name] = write_units(item_size(after))
    return units


def _set_assignments(body: Mapping[str, Any]) -> Item:
    """The attributes a simple ``SET #a = :v, b = :w`` update expression writes."""
    match = _SET_CLAUSE.match(str(body.get("UpdateExpression", "")))
    if match is None:
        return {}
    names = body.get("ExpressionAttributeNames", {})
    values = body.get("ExpressionAttributeValues", {})
    assigned: Item = {}
    for clause in match.group(1).split(","):
        left, _, right = clause.partition("=")
        name, placeholder = left.strip(), right.strip()
        if placeholder in values:
            assigned[names.get(name, name)] = values[placeholder]
    return assigned


def table_specs(named: Iterable[tuple[str, Mapping[str, Any]]]) -> dict[str, TableSpec]:
    """``{table name: TableSpec}`` from ``(name, create_table arguments)`` pairs."""
    return {name: TableSpec.from_create_args(args) for name, args in named}
