"""Helpers of the DynamoDB run store tests: records, growing runs, reading raw items, and a
meter of the DynamoDB requests a store makes."""

from __future__ import annotations

import base64
import hashlib
import json
from collections import Counter
from typing import Any

from relayflow.adapters.aws.attributes import write_units
from relayflow.adapters.aws.clients import AwsClients
from relayflow.adapters.aws.runstore import DynamoDBRunStore
from relayflow.core.record import RunRecord
from relayflow.protocol import StepAttempt, StepJournalEntry

TABLE = "runs"
T0 = 1_767_225_600_000
#: A step output this large (and noisy) does not fit in the header: its save writes a page.
PAGED = 1_500


class FixedClock:
    def now_ms(self) -> int:
        return T0


def new_record(run_id: str = "run-1", **fields: Any) -> RunRecord:
    base: dict[str, Any] = {
        "id": run_id,
        "workflow_id": "orders.fulfil",
        "input": {"order": 42},
        "started_at": T0,
        "wake_at": T0,
    }
    base.update(fields)
    return RunRecord(**base)


def noise(seed: int, size: int) -> str:
    """``size`` characters that do not compress (as random step outputs do not)."""
    data = b"".join(
        hashlib.sha256(f"{seed}:{block}".encode()).digest() for block in range(size // 32 + 1)
    )
    return base64.b64encode(data).decode()[:size]


def step(i: int, size: int = 40, *, noisy: bool = False) -> StepJournalEntry:
    return StepJournalEntry(
        status="ok",
        output={"i": i, "pad": noise(i, size) if noisy else "x" * size},
        started_at=T0 + i,
        finished_at=T0 + i + 1,
        attempts=[StepAttempt(attempt=1, status="ok", started_at=T0 + i, finished_at=T0 + i + 1)],
    )


def with_steps(
    record: RunRecord, steps: range, size: int = 40, *, noisy: bool = False
) -> RunRecord:
    """``record`` with the steps in ``steps`` added (entries replaced, never edited)."""
    journal = record.journal.model_copy(update={"step_results": dict(record.journal.step_results)})
    for i in steps:
        journal.step_results[f"step-{i}"] = step(i, size, noisy=noisy)
    last = steps[-1] if len(steps) else 0
    return record.model_copy(
        update={"journal": journal, "invocation_count": last + 1, "wake_at": T0 + last}
    )


def with_step(record: RunRecord, i: int, size: int = 40, *, noisy: bool = False) -> RunRecord:
    return with_steps(record, range(i, i + 1), size, noisy=noisy)


def with_paged_step(record: RunRecord, i: int) -> RunRecord:
    """``record`` with a step too large to ride in the header (its save writes a page)."""
    return with_step(record, i, PAGED, noisy=True)


def grow(store: DynamoDBRunStore, record: RunRecord, steps: int, chunk: int = 95) -> RunRecord:
    """Add steps up to ``steps`` in saves of ``chunk`` steps."""
    count = len(record.journal.step_results)
    while count < steps:
        upto = min(count + chunk, steps)
        record = store.save(
            with_steps(record, range(count, upto), size=300), expected_version=record.version
        )
        count = upto
    return record


def all_items(clients: AwsClients, run_id: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    params: dict[str, Any] = {
        "TableName": TABLE,
        "KeyConditionExpression": "pk = :p",
        "ExpressionAttributeValues": {":p": {"S": run_id}},
    }
    while True:
        page = clients.dynamodb().query(**params)
        items.extend(page["Items"])
        if "LastEvaluatedKey" not in page:
            return items
        params["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def page_items(clients: AwsClients, run_id: str) -> list[dict[str, Any]]:
    return [item for item in all_items(clients, run_id) if item["sk"]["S"] != "#run"]


def fresh_get(clients: AwsClients, run_id: str = "run-1", **options: Any) -> RunRecord | None:
    """The run as a new process (empty caches) reads it."""
    return DynamoDBRunStore(TABLE, client_factory=clients.dynamodb, **options).get(run_id)


class Meter:
    """Counts DynamoDB requests by operation, the items they write and their write units."""

    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()
        self.items = 0
        self.units = 0

    def __call__(self, model: Any, params: dict[str, Any], **_: Any) -> None:
        self.calls[model.name] += 1
        body = json.loads(params["body"])
        if model.name == "TransactWriteItems":
            for action in body["TransactItems"]:
                self.items += 1
                item = action.get("Put", {}).get("Item")
                self.units += write_units(item, transactional=True) if item else 2
        elif model.name == "BatchWriteItem":
            for request in body["RequestItems"][TABLE]:
                self.items += 1
                item = request.get("PutRequest", {}).get("Item")
                self.units += _units(item) if item else 1
        elif model.name in ("PutItem", "UpdateItem", "DeleteItem"):
            self.items += 1
            self.units += _units(body["Item"]) if "Item" in body else 1

    @property
    def requests(self) -> int:
        return sum(self.calls.values())

    @property
    def writes(self) -> int:
        names = ("PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem", "TransactWriteItems")
        return sum(self.calls[name] for name in names)


def _units(item: dict[str, Any]) -> int:
    # Binary values travel base64-encoded: bill their decoded size.
    import base64

    decoded = {
        name: {"B": base64.b64decode(value["B"])} if "B" in value else value
        for name, value in item.items()
    }
    return write_units(decoded, transactional=False)


class Metered:
    """Registers a :class:`Meter` on a client for the duration of a ``with`` block."""

    def __init__(self, clients: AwsClients) -> None:
        self.client = clients.dynamodb()
        self.meter = Meter()

    def __enter__(self) -> Meter:
        self.client.meta.events.register("before-call.dynamodb.*", self.meter)
        return self.meter

    def __exit__(self, *exc: object) -> None:
        self.client.meta.events.unregister("before-call.dynamodb.*", self.meter)
