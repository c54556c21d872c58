"""Flow control at run level on the local stack (``relayflow dev``: the waitress api, the moto
server, the drive and worker functions on local threads), over real HTTP.

For each limit, ``limit`` holding runs take every slot of one key and wait for an event; then
``queued`` runs of the same key are triggered (each queues behind them) and the holders are
sent the event. From then on every run that ends hands its slot to the next queued one, so
the queue drains through the key at the rate the stack can hand slots on:

- **release to start** (limit 1): for each run after the first, the time from its
  predecessor's end (``completedAt``) to its own start (the start of its first step in the
  journal). With one slot, the predecessor is the run that ended last before it started.
- **hot-key throughput**: queued runs completed per second, from the first holder's end to
  the last run's end; and the most runs seen holding the key at once (from their step start
  to their end), which must not exceed the limit.

Times are the stack's own clock (one process), in milliseconds.
"""

from __future__ import annotations

import itertools
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from bench.dev_stack import DevStack
from bench.flow_workflows import GO, five_wide, singleton

APP = "bench.flow_workflows"
#: Runs queued behind the holders: limit 1 measures one release per queued run.
QUEUED = {1: 100, 5: 100}
QUICK_QUEUED = {1: 20, 5: 25}
#: Client threads triggering runs, as a few callers would.
TRIGGER_THREADS = 4
#: How often the bench asks whether the last run has ended (a client polling).
POLL_S = 0.25
DRAIN_TIMEOUT_S = 180.0
_WORKFLOWS = {1: singleton.id, 5: five_wide.id}


@dataclass(frozen=True)
class Ran:
    """One run's slot-holding interval: its first step's start and its end (ms)."""

    run_id: str
    step_started_at: int
    completed_at: int


@dataclass(frozen=True)
class Drain:
    """A key's queue drained at one limit: every run's interval, holders first."""

    limit: int
    holders: tuple[Ran, ...]
    queued: tuple[Ran, ...]
    #: Runs the trigger answered ``queued`` (every run after the holders, when nothing broke).
    answered_queued: int

    @property
    def runs_per_s(self) -> float:
        """Queued runs completed per second, from the first release to the last end."""
        first_release = min(r.completed_at for r in self.holders)
        last_end = max(r.completed_at for r in self.queued)
        return len(self.queued) / max(1, last_end - first_release) * 1000

    @property
    def most_at_once(self) -> int:
        """The most runs whose (step start, end) intervals overlap at one instant."""
        edges = sorted(
            [(r.step_started_at, 1) for r in (*self.holders, *self.queued)]
            + [(r.completed_at, -1) for r in (*self.holders, *self.queued)]
        )
        most = current = 0
        for _, change in edges:  # an end sorts before a start at the same ms
            current += change
            most = max(most, current)
        return most

    def release_to_start_ms(self) -> list[int]:
        """Limit 1: each run's start less its predecessor's end, in start order."""
        ordered = sorted((*self.holders, *self.queued), key=lambda r: r.step_started_at)
        return [
            later.step_started_at - earlier.completed_at
            for earlier, later in itertools.pairwise(ordered)
        ]


def measure(*, quick: bool) -> dict[int, Drain]:
    """Drain a queue through one key at limit 1 and at limit 5, on one ``relayflow dev``."""
    sizes = QUICK_QUEUED if quick else QUEUED
    with DevStack(app=APP) as dev:
        return {limit: _drain(dev, limit, queued) for limit, queued in sizes.items()}


def _drain(dev: DevStack, limit: int, queued: int) -> Drain:
    workflow_id = _WORKFLOWS[limit]
    key = f"hot-{limit}"

    def trigger(n: int, *, hold: bool = False) -> dict[str, Any]:
        body = {"workflowId": workflow_id, "input": {"key": key, "n": n, "hold": hold}}
        status, run = dev.request_post("/api/runs", body)
        if status != 201:
            raise RuntimeError(f"trigger answered {status}: {run}")
        return dict(run)

    holders = [trigger(-1 - n, hold=True) for n in range(limit)]
    if any(run["status"] != "waiting" for run in holders):
        raise RuntimeError(f"holders did not take the slots: {[r['status'] for r in holders]}")
    with ThreadPoolExecutor(TRIGGER_THREADS) as pool:
        runs = list(pool.map(trigger, range(queued)))
        answered_queued = sum(run["status"] == "queued" for run in runs)
        list(pool.map(_send_go(dev), [run["id"] for run in holders]))
    # The last run triggered is the last to start; with several slots another may end later.
    for run in [runs[-1], *runs]:
        _wait_for_end(dev, run["id"])
    return Drain(
        limit=limit,
        holders=tuple(_ran(dev, run["id"]) for run in holders),
        queued=tuple(_ran(dev, run["id"]) for run in runs),
        answered_queued=answered_queued,
    )


def _send_go(dev: DevStack) -> Any:
    def send(run_id: str) -> None:
        status, answer = dev.request_post(f"/api/runs/{run_id}/events", {"eventType": GO})
        if status != 200:
            raise RuntimeError(f"event answered {status}: {answer}")

    return send


def _wait_for_end(dev: DevStack, run_id: str) -> None:
    deadline = time.monotonic() + DRAIN_TIMEOUT_S
    while time.monotonic() < deadline:
        if dev.request("GET", f"/api/runs/{run_id}")[1]["status"] == "completed":
            return
        time.sleep(POLL_S)
    raise RuntimeError(f"run {run_id} did not complete in {DRAIN_TIMEOUT_S:.0f} s")


def _ran(dev: DevStack, run_id: str) -> Ran:
    run = dev.request("GET", f"/api/runs/{run_id}")[1]
    if run["status"] != "completed":
        raise RuntimeError(f"run {run_id} is {run['status']}, not completed")
    timeline = dev.request("GET", f"/api/runs/{run_id}/timeline")[1]
    step = next(e for e in timeline["entries"] if e["type"] == "step")
    return Ran(run_id, int(step["startedAt"]), int(run["completedAt"]))
