"""DynamoDB's billing rules, applied to the requests a client sends and the answers it gets.

DynamoDB bills on-demand writes and reads by item size, which moto does not report (its
``ConsumedCapacity`` is a fixed figure), so units are computed from the items themselves with
the documented rules: an item's size is the UTF-8 length of its attribute names plus their
values; a write costs one unit per started KB of the larger of the old and the new item (two
in a transaction); a strongly consistent read costs one unit per started 4 KB (a query sums
its items first), half that eventually consistent. Global secondary index writes are priced
apart: an index entry (keys plus projected attributes) is written when it appears,
disappears, changes key (delete plus put) or changes a projected attribute.

The "old" item of an overwrite, delete or index update is the last version of it this
pricer saw written or read; the orchestrator reads a run before it writes it, so it knows
what its writes replace.
"""

from __future__ import annotations

import math
import re
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from relayflow.adapters.aws.attributes import item_size

Item = dict[str, dict[str, Any]]

_SET_CLAUSE = re.compile(r"^\s*SET\s+(.*)$", re.IGNORECASE)
_READS = frozenset({"GetItem", "TransactGetItems", "BatchGetItem", "Query", "Scan"})
#: Partitions (runs) whose items a pricer remembers, least recently used dropped first.
PARTITIONS = 256
#: Set while a request not sent yet is priced: its items must not be remembered.
_QUOTING: ContextVar[bool] = ContextVar("relayflow_quoting", default=False)


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


def table_specs(named: Iterable[tuple[str, Mapping[str, Any]]]) -> dict[str, TableSpec]:
    """``{table name: TableSpec}`` from ``(name, create_table arguments)`` pairs."""
    return {name: TableSpec.from_create_args(args) for name, args in named}


@dataclass(frozen=True)
class PricedWrite:
    """One item write as priced (for tracing where write units go)."""

    operation: str
    table: str
    key: tuple[str, ...]
    old_size: int
    new_size: int | None
    table_units: int
    index_units: dict[str, int]
    failed: bool


@dataclass
class PricedRequest:
    """What one DynamoDB request costs."""

    table_write_units: int = 0
    index_write_units: int = 0
    read_units: float = 0.0
    writes: list[PricedWrite] = field(default_factory=list)


class DynamoDBPricer:
    """Prices DynamoDB requests from their parameters and answers (see the module docstring).

    Args:
        tables: The schema of each table by name; items of other tables are priced without
            indexes or a remembered old version.
    """

    def __init__(self, tables: Mapping[str, TableSpec], *, partitions: int = PARTITIONS) -> None:
        self.tables = dict(tables)
        self._partitions = partitions
        self._shadow: dict[str, OrderedDict[str, dict[tuple[str, ...], Item]]] = {
            name: OrderedDict() for name in tables
        }

    def forget(self, table: str, partition: Mapping[str, Any]) -> None:
        """Drop the remembered items of one partition (``{"pk": value}``: a run that ended)."""
        shadow = self._shadow.get(table)
        if shadow is not None:
            for value in partition.values():
                shadow.pop(repr(value), None)

    def _partition(self, table: str, key: tuple[str, ...]) -> dict[tuple[str, ...], Item]:
        shadow = self._shadow[table]
        items = shadow.get(key[0])
        if items is None:
            items = shadow[key[0]] = {}
            while len(shadow) > self._partitions:
                shadow.popitem(last=False)
        else:
            shadow.move_to_end(key[0])
        return items

    def quote(self, operation: str, params: Mapping[str, Any]) -> PricedRequest:
        """What a write request about to be sent costs if it succeeds, from the items this
        pricer remembers (nothing is remembered of it: :meth:`price` does when it is sent)."""
        token = _QUOTING.set(True)
        try:
            return self.price(operation, params, {}, failed=False)
        finally:
            _QUOTING.reset(token)

    def price(
        self, operation: str, params: Mapping[str, Any], parsed: Any, *, failed: bool
    ) -> PricedRequest:
        """The units of one request (``parsed`` is its answer, or the error's response)."""
        out = PricedRequest()
        answer = parsed if isinstance(parsed, dict) else {}
        if operation == "PutItem":
            self._put(out, operation, params["TableName"], params["Item"], failed, False)
        elif operation == "DeleteItem":
            self._delete(out, operation, params["TableName"], params["Key"], failed, False)
        elif operation == "UpdateItem":
            self._update(out, operation, params, failed, False)
        elif operation == "BatchWriteItem":
            for table, requests in params.get("RequestItems", {}).items():
                unprocessed = answer.get("UnprocessedItems", {}).get(table, [])
                for request in requests:
                    if request in unprocessed:
                        continue
                    if "PutRequest" in request:
                        item = request["PutRequest"]["Item"]
                        self._put(out, operation, table, item, failed, False)
                    else:
                        key = request["DeleteRequest"]["Key"]
                        self._delete(out, operation, table, key, failed, False)
        elif operation == "TransactWriteItems":
            for action in params.get("TransactItems", []):
                ((kind, body),) = action.items()
                table = body["TableName"]
                if kind == "Put":
                    self._put(out, operation, table, body["Item"], failed, True)
                elif kind == "Delete":
                    self._delete(out, operation, table, body["Key"], failed, True)
                elif kind == "Update":
                    self._update(out, operation, body, failed, True)
                else:
                    old = self._old(table, body["Key"])
                    out.table_write_units += 2 * write_units(item_size(old or {}))
        elif operation in _READS:
            out.read_units = self._reads(operation, params, answer)
        return out

    def _old(self, table: str, item_or_key: Mapping[str, Any]) -> Item | None:
        spec = self.tables.get(table)
        if spec is None:
            return None
        key = spec.key_of(item_or_key)
        return self._partition(table, key).get(key)

    def _remember(self, table: str, item: Item) -> None:
        spec = self.tables.get(table)
        if spec is not None:
            key = spec.key_of(item)
            self._partition(table, key)[key] = dict(item)

    def _write(
        self,
        out: PricedRequest,
        operation: str,
        table: str,
        key: Mapping[str, Any],
        new: Item | None,
        failed: bool,
        transactional: bool,
    ) -> None:
        old = self._old(table, key)
        units = write_units(max(item_size(new or {}), item_size(old or {})))
        table_units = 2 * units if transactional else units
        out.table_write_units += table_units
        spec = self.tables.get(table)
        by_index = {} if failed or spec is None else _units_by_index(spec, old, new)
        out.writes.append(
            PricedWrite(
                operation=operation,
                table=table,
                key=tuple(str(v) for v in key.values()) if spec is None else spec.key_of(key),
                old_size=item_size(old or {}),
                new_size=None if new is None else item_size(new),
                table_units=table_units,
                index_units=by_index,
                failed=failed,
            )
        )
        if failed or spec is None:
            return
        out.index_write_units += sum(by_index.values())
        if _QUOTING.get():
            return
        stored = spec.key_of(key)
        if new is None:
            self._partition(table, stored).pop(stored, None)
        else:
            self._partition(table, stored)[stored] = dict(new)

    def _put(
        self,
        out: PricedRequest,
        operation: str,
        table: str,
        item: Item,
        failed: bool,
        transactional: bool,
    ) -> None:
        self._write(out, operation, table, item, dict(item), failed, transactional)

    def _delete(
        self,
        out: PricedRequest,
        operation: str,
        table: str,
        key: Item,
        failed: bool,
        transactional: bool,
    ) -> None:
        self._write(out, operation, table, key, None, failed, transactional)

    def _update(
        self,
        out: PricedRequest,
        operation: str,
        body: Mapping[str, Any],
        failed: bool,
        transactional: bool,
    ) -> None:
        table, key = body["TableName"], body["Key"]
        new = dict(self._old(table, key) or key)
        new.update(_set_assignments(body))
        self._write(out, operation, table, key, new, failed, transactional)

    def _reads(self, operation: str, params: Mapping[str, Any], answer: Mapping[str, Any]) -> float:
        consistent = bool(params.get("ConsistentRead", False))
        table = str(params.get("TableName"))
        if operation == "GetItem":
            # A projection does not make a read cheaper: the whole stored item is billed.
            stored = self._old(table, params.get("Key", {})) or answer.get("Item", {})
            if "Item" in answer and "ProjectionExpression" not in params:
                self._remember(table, answer["Item"])
            return read_units(item_size(stored), consistent=consistent)
        if operation in ("Query", "Scan"):
            items = answer.get("Items", [])
            if "IndexName" not in params and "ProjectionExpression" not in params:
                for item in items:
                    self._remember(table, item)
            return read_units(sum(item_size(item) for item in items), consistent=consistent)
        units = 0.0
        if operation == "BatchGetItem":
            for name, items in answer.get("Responses", {}).items():
                strong = bool(params.get("RequestItems", {}).get(name, {}).get("ConsistentRead"))
                for item in items:
                    units += read_units(item_size(item), consistent=strong)
            return units
        for response in answer.get("Responses", []):
            units += 2 * read_units(item_size(response.get("Item", {})), consistent=True)
        return units


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
