"""Counts AWS requests made through a boto3 session and prices DynamoDB writes and reads.

Requests are counted with botocore's ``before-call`` event, by service and operation. moto
reports a fixed consumed capacity, so write and read units are computed from the items
themselves with DynamoDB's documented rules (``relayflow.adapters.aws.billing``): an item's
size is the UTF-8 length of its attribute names plus their values; a write costs one unit per
started KB of the larger of the old and the new item (two in a transaction); a strongly
consistent read costs one unit per started 4 KB (a query sums its items first). Global
secondary index writes are priced apart. The meter sees every request of the session, for
every run and none, whatever the orchestrator records.
"""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from relayflow.adapters.aws.billing import (
    DynamoDBPricer,
    IndexSpec,
    PricedWrite,
    TableSpec,
    read_units,
    table_specs,
    write_units,
)

__all__ = [
    "AwsMeter",
    "IndexSpec",
    "PricedWrite",
    "TableSpec",
    "Tally",
    "read_units",
    "table_specs",
    "write_units",
]


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
        self._pricer = DynamoDBPricer(tables, partitions=sys.maxsize)
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
            priced = self._pricer.price(operation, params, parsed, failed=failed)
            t = self.tally
            t.table_write_units += priced.table_write_units
            t.index_write_units += priced.index_write_units
            t.read_units += priced.read_units
            if priced.table_write_units:
                t.units_by_operation[operation] += priced.table_write_units
            for write in priced.writes:
                if write.new_size is not None:
                    t.largest_item = max(t.largest_item, write.new_size)
                if self.on_write is not None:
                    self.on_write(write)
        elif service == "s3" and operation == "PutObject" and not failed:
            body = params.get("Body", b"")
            self.tally.s3_bytes_put += len(body) if isinstance(body, bytes | str) else 0
