"""Figure 8: what flow control costs on DynamoDB (moto): the requests and write units of each
store operation (concurrency slots, rate limits, debounce), and per run for a
concurrency-limited run that got its slot at once and one that queued; then, at run level on
the local stack (``flow_local``), the time from a slot's release to the next queued run's
start and the throughput of one hot key, with the ceiling DynamoDB's partition limit puts on
that key at the write units measured here.

Counts are deterministic (one run each), metered on the stores themselves.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from bench import flow_local, flow_runs
from bench.aws_meter import AwsMeter, Tally, table_specs
from bench.moto_stack import REGION, _session
from bench.table import Row, verdict
from relayflow.adapters.aws import tables
from relayflow.adapters.aws.clients import AwsClients
from relayflow.adapters.aws.concurrency_slots import DynamoDBConcurrencySlots
from relayflow.adapters.aws.debounces import DynamoDBDebouncer
from relayflow.adapters.aws.rate_limits import DynamoDBRateLimiter
from relayflow.config import Settings
from relayflow.flow.ports import SlotScope
from relayflow.local.stack import SWEEP_INTERVAL_S
from relayflow.testing.aws import mock_aws

NAME = "flow"
FIGURE = "8 flow control"
TABLE = "runs"
T0 = 1_700_000_000_000
SCOPE = SlotScope("crm.sync", "acme")
#: Targets: extra DynamoDB writes per concurrency-limited run.
UNQUEUED_TARGET = 2
QUEUED_TARGET = 4
#: Target for the p99 time from a release to the next queued run's start: "promptly, not at
#: the next sweep" means far under the local stack's sweep interval (30x under it here).
RELEASE_TO_START_P99_MS = 1_000
#: What one DynamoDB partition serves: 1,000 write units a second.
PARTITION_WRITE_UNITS_PER_S = 1_000


@dataclass(frozen=True)
class Operation:
    """One store operation: its requests and what they cost."""

    name: str
    writes: int
    reads: int
    write_units: int


def _cost(name: str, tally: Tally) -> Operation:
    return Operation(name, tally.dynamodb_writes, tally.dynamodb_reads, tally.write_units)


def measure() -> dict[str, Operation]:
    """Each operation once, on a fresh key, metered one at a time."""
    with mock_aws(config={"core": {"reset_boto3_session": False}}, region=REGION):
        session = _session()
        meter = AwsMeter(session, table_specs([(TABLE, tables.RUNS_TABLE)]))
        clients = AwsClients(session=session, region=REGION)
        tables.create_resources(clients, Settings(table_name=TABLE))
        slots = DynamoDBConcurrencySlots(TABLE, client_factory=clients.dynamodb)
        limiter = DynamoDBRateLimiter(TABLE, client_factory=clients.dynamodb)
        debouncer = DynamoDBDebouncer(TABLE, client_factory=clients.dynamodb)
        # The key's state item is created once, by its first acquire ever.
        slots.acquire(SCOPE, "warm", limit=1, priority=0, now_ms=T0)
        slots.release(SCOPE, "warm", limit=1, now_ms=T0)
        meter.reset()

        steps: list[tuple[str, Callable[[], Any]]] = [
            ("acquire, slot free", lambda: slots.acquire(SCOPE, "r1", **_slot_args())),
            ("acquire, queued", lambda: slots.acquire(SCOPE, "r2", **_slot_args())),
            ("acquire again (repeat)", lambda: slots.acquire(SCOPE, "r2", **_slot_args())),
            ("release, starts the next", lambda: slots.release(SCOPE, "r1", **_release())),
            ("release, queue empty", lambda: slots.release(SCOPE, "r2", **_release())),
            ("rate limit reserve", lambda: limiter.reserve("api", "c1", **_rate_args())),
            ("rate limit reserve (repeat)", lambda: limiter.reserve("api", "c1", **_rate_args())),
            ("debounce, opens", lambda: debouncer.offer(SCOPE, "d1", {}, **_debounce())),
            ("debounce, joins", lambda: debouncer.offer(SCOPE, "d2", {}, **_debounce())),
            ("debounce, close", lambda: debouncer.close(SCOPE, "d1", now_ms=T0 + 10_000)),
        ]
        measured: dict[str, Operation] = {}
        for name, step in steps:
            step()
            measured[name] = _cost(name, meter.reset())
    return measured


def _slot_args() -> dict[str, Any]:
    return {"limit": 1, "priority": 0, "now_ms": T0}


def _release() -> dict[str, Any]:
    return {"limit": 1, "now_ms": T0}


def _rate_args() -> dict[str, Any]:
    return {"limit": 10, "window_ms": 60_000, "units": 1, "on_limit": "queue", "now_ms": T0}


def _debounce() -> dict[str, Any]:
    return {"delay_ms": 1_000, "mode": "trailing", "max_wait_ms": None, "now_ms": T0}


def per_run(measured: dict[str, Operation]) -> tuple[tuple[int, int], tuple[int, int]]:
    """(write requests, write units) a run adds when it got its slot at once, and when it
    queued. A queued run pays its acquire and its release; the release that started it is
    its predecessor's, which writes once either way: only the units it adds count here."""
    free = measured["acquire, slot free"]
    queued = measured["acquire, queued"]
    starting = measured["release, starts the next"]
    release = measured["release, queue empty"]
    unqueued_cost = (free.writes + release.writes, free.write_units + release.write_units)
    queued_cost = (
        queued.writes + release.writes,
        queued.write_units + (starting.write_units - release.write_units) + release.write_units,
    )
    return unqueued_cost, queued_cost


def rows(
    measured: dict[str, Operation],
    drains: dict[int, flow_local.Drain] | None = None,
    runs: flow_runs.RunCosts | None = None,
) -> list[Row]:
    """The figure's rows: one per operation, the per-run totals against the targets, then
    (when measured) the local stack's release-to-start time and hot-key throughput."""
    out = [
        Row(
            FIGURE,
            op.name,
            f"{op.writes} writes ({op.write_units} WCU), {op.reads} reads",
        )
        for op in measured.values()
    ]
    (unqueued, unqueued_units), (queued, queued_units) = per_run(measured)
    out.append(
        Row(
            FIGURE,
            "writes to the key's slots per limited run, no wait",
            f"{unqueued} ({unqueued_units} WCU)",
        )
    )
    out.append(
        Row(
            FIGURE,
            "writes to the key's slots per limited run that queued",
            f"{queued} ({queued_units} WCU)",
        )
    )
    if runs is not None:
        for label, (writes, units), target in (
            ("no wait", runs.no_wait, UNQUEUED_TARGET),
            ("that queued", runs.queued, QUEUED_TARGET),
        ):
            out.append(
                Row(
                    FIGURE,
                    f"extra writes per limited run {label}, whole run on the AWS driver vs the "
                    "same run unlimited",
                    f"{writes} ({units} WCU)",
                    f"<= {target}",
                    verdict(writes <= target),
                )
            )
    # Every item of a key's slots lives in one partition: its write units per run bound the key.
    for label, units in (("no wait", unqueued_units), ("every run queued", queued_units)):
        out.append(
            Row(
                FIGURE,
                f"one key's ceiling on DynamoDB, {label}: {PARTITION_WRITE_UNITS_PER_S:,} WCU/s "
                f"per partition / {units} WCU per run",
                f"{PARTITION_WRITE_UNITS_PER_S / units:.0f} runs/s",
            )
        )
    return out + (local_rows(drains) if drains else [])


def local_rows(drains: dict[int, flow_local.Drain]) -> list[Row]:
    """Release to start (limit 1) and hot-key throughput, on the local stack."""
    out: list[Row] = []
    single = drains.get(1)
    if single is not None:
        waits = single.release_to_start_ms()
        p50, p99 = _percentile(waits, 0.5), _percentile(waits, 0.99)
        sweep_ms = SWEEP_INTERVAL_S * 1000
        out.append(
            Row(
                FIGURE,
                f"local stack: release to the next queued run's first step, limit 1 (p50 / p99 "
                f"/ max, {len(waits)} releases; the sweep runs every {sweep_ms / 1000:.0f} s)",
                f"{p50:.0f} / {p99:.0f} / {max(waits):.0f} ms",
                f"p99 < {RELEASE_TO_START_P99_MS} ms",
                verdict(p99 < RELEASE_TO_START_P99_MS and min(waits) >= 0),
            )
        )
    for limit, drain in sorted(drains.items()):
        out.append(
            Row(
                FIGURE,
                f"local stack (moto server): one hot key, limit {limit}, {len(drain.queued)} "
                "queued runs of one step drained",
                f"{drain.runs_per_s:.1f} runs/s; at most {drain.most_at_once} at once",
                f"at most {limit} at once",
                verdict(drain.most_at_once <= limit and drain.answered_queued == len(drain.queued)),
            )
        )
    return out


def _percentile(values: list[int], q: float) -> float:
    """The nearest-rank percentile."""
    ordered = sorted(values)
    return float(ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))])
