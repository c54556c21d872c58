"""The flow-control scenario of the reliability sweeps: a singleton per key (``limit=1``)
whose runs hold their slot across a step, a short sleep and a step; a first run takes the
slot, a second queues, a third is delayed and queues when its time comes; and a debounced
burst of three triggers of another workflow folds into one run. Driven through a
:class:`Cluster` with client retries and recovery by the normal means only (alarms, the
sweeper and its queue checks, lease expiry)."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from reliability_cluster import SETTINGS, Cluster, Outcome
from reliability_workflows import LEDGER, STEP_WORK

from relayflow import WorkflowContext, workflow
from relayflow.adapters.aws.clients import AwsClients
from relayflow.adapters.aws.concurrency_slots import DynamoDBConcurrencySlots
from relayflow.flow import Concurrency, Debounce, TriggerOptions
from relayflow.flow.ports import SlotScope

SINGLETON = "reliability.flow_singleton"
DIGEST = "reliability.flow_digest"
KEY = "k"
#: The singleton runs, in trigger order; the last is triggered with :data:`DELAY_MS`.
NAMES = ("a", "b", "c")
#: The next run of the key, triggered when a slot is still held once every run ended.
PROBE = "d"
DELAY_MS = 20_000
BURST = 3
#: Between two triggers of the burst: shorter than its debounce delay, so they fold.
BURST_GAP_MS = 5_000


class Starts:
    """When each singleton run first did its step (virtual time)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._first: dict[str, int] = {}

    def reset(self) -> None:
        with self._lock:
            self._first.clear()

    def mark(self, name: str) -> None:
        now = STEP_WORK.clock.now_ms() if STEP_WORK.clock is not None else 0
        with self._lock:
            self._first.setdefault(name, now)

    def first(self, name: str) -> int | None:
        with self._lock:
            return self._first.get(name)


STARTS = Starts()


def most_at_once(spans: list[tuple[int, int]]) -> int:
    """The most spans (half-open) that contain one instant."""
    moments = sorted({t for span in spans for t in span})
    return max((sum(1 for a, b in spans if a <= t < b) for t in moments), default=0)


def work(name: str) -> str:
    """The singleton's step: counted in the ledger, its first time kept in :data:`STARTS`."""
    LEDGER.record("work")
    STARTS.mark(name)
    return name


def digest(data: dict[str, Any]) -> int:
    """The debounced run's only step."""
    LEDGER.record("digest")
    n: int = data["n"]
    return n


@workflow(id=SINGLETON, concurrency=Concurrency(limit=1, key="key"))
async def singleton_workflow(data: dict[str, Any], ctx: WorkflowContext) -> str:
    """Holds its key's only slot from its step, across a sleep, to its end."""
    done: str = await ctx.step("work", work, data["name"])
    await ctx.sleep("10s")
    return done


@workflow(id=DIGEST)
async def digest_workflow(data: dict[str, Any], ctx: WorkflowContext) -> int:
    """One step on the burst's last input."""
    sent: int = await ctx.step("send", digest, data)
    return sent


def singleton_run_id(name: str) -> str:
    """The run id of the singleton run triggered with idempotency key ``flow-<name>``."""
    return f"idem-{SINGLETON}-flow-{name}"


@dataclass(frozen=True)
class FlowOutcome:
    """What the scenario ended as, compared between a faulty and a fault-free execution."""

    singletons: tuple[Outcome, ...]
    #: The outcome of every run of the debounced workflow (exactly one when the burst folds).
    digests: tuple[Outcome, ...]
    #: The most singleton runs between their first and last step at any instant.
    most_at_once: int
    #: Whether the delayed run did no step before its delay passed.
    delay_kept: bool
    #: Whether the key's next run, triggered when its slots were not empty once every run
    #: ended, completed (True when none was needed).
    next_run_ok: bool
    #: The key's holders and queue once everything ended (and the next run, if needed).
    holders: tuple[str, ...]
    queue: tuple[str, ...]


def slots_store() -> DynamoDBConcurrencySlots:
    """The DynamoDB slots store, on clients that are no fault points (reads of the test)."""
    clients = AwsClients(region=SETTINGS.region)
    return DynamoDBConcurrencySlots(SETTINGS.require("table_name"), client_factory=clients.dynamodb)


def trigger(driver: Any, data: dict[str, Any], options: TriggerOptions | None) -> Any:
    """Trigger a singleton run (its client retries with the same idempotency key)."""
    key = f"flow-{data['name']}"
    return driver.trigger(SINGLETON, data, idempotency_key=key, options=options)


def run_flow(cluster: Cluster) -> FlowOutcome:
    """Trigger the singleton runs and the burst (each request retried by its client), then
    recover by the normal means until every run ended."""
    STARTS.reset()
    triggered_at = cluster.clock.now_ms()
    for name in NAMES:
        options = TriggerOptions(delay=DELAY_MS) if name == NAMES[-1] else None
        data = {"key": KEY, "name": name}
        cluster.client_call(lambda driver, data=data, opts=options: trigger(driver, data, opts))
    burst = TriggerOptions(debounce=Debounce(key="user", delay="30s"))
    for n in range(BURST):
        cluster.client_call(
            lambda driver, n=n: driver.trigger(DIGEST, {"user": "u", "n": n}, options=burst)
        )
        cluster.clock.advance(BURST_GAP_MS)
    for name in NAMES:
        cluster.finish(singleton_run_id(name))
    digests = [summary.id for summary in cluster.runs_of(DIGEST)]
    for run_id in digests:
        cluster.finish(run_id)
    scope = SlotScope(SINGLETON, KEY)
    store = slots_store()
    names = NAMES
    next_run_ok = True
    if store.holders(scope) or store.queue(scope):
        # A slot kept by a holder that ended (its process died between its end and its
        # release) is freed by the queue check of the key's next run: trigger one, without
        # faults, and let it end.
        cluster.use_plan(None)
        cluster.client_call(lambda driver: trigger(driver, {"key": KEY, "name": PROBE}, None))
        next_run_ok = cluster.finish(singleton_run_id(PROBE)).status == "completed"
        names = (*NAMES, PROBE)
    # A run holds its slot from its start to its end: from its step (a step run again after
    # a crash keeps its first time) to its completion.
    spans = [
        (STARTS.first(name), cluster.run(singleton_run_id(name)).completed_at) for name in names
    ]
    delayed_start = STARTS.first(NAMES[-1])
    return FlowOutcome(
        singletons=tuple(cluster.outcome(singleton_run_id(name)) for name in NAMES),
        digests=tuple(cluster.outcome(run_id) for run_id in sorted(digests)),
        most_at_once=most_at_once([(a, b) for a, b in spans if a is not None and b is not None]),
        delay_kept=delayed_start is not None and delayed_start >= triggered_at + DELAY_MS,
        next_run_ok=next_run_ok,
        holders=tuple(holder.run_id for holder in store.holders(scope)),
        queue=tuple(waiting.run_id for waiting in store.queue(scope)),
    )
