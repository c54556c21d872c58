"""Lease renewal on the wall clock: the keeper's timer thread renews the lease of an
invocation in flight, so a step longer than the lease keeps its run."""

from __future__ import annotations

import threading
import time
from typing import Any

from relayflow.adapters.memory import InMemoryAlarmClock, InMemoryRunStore
from relayflow.clock import SystemClock
from relayflow.core.settings import CoreSettings
from relayflow.core.trigger import TriggerSpec
from relayflow.engine import Engine
from relayflow.ports import DispatcherResolver

LEASE_MS = 1_500
STEP_S = 2.5


class SlowHost:
    """Answers after ``STEP_S`` of wall time, noting the run's stored lease on the way out."""

    def __init__(self, runs: InMemoryRunStore, clock: SystemClock) -> None:
        self.runs = runs
        self.clock = clock
        self.lease_at_answer: tuple[str, int, int] | None = None
        self.threads: set[str] = set()

    def dispatch(self, request: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        time.sleep(STEP_S)
        record = self.runs.get(request["runId"])
        assert record is not None and record.lease is not None
        self.lease_at_answer = (record.lease.owner, record.lease.expires_at, self.clock.now_ms())
        self.threads = {t.name for t in threading.enumerate()}
        return 200, {"status": "completed", "output": "done"}


def test_the_timer_thread_keeps_the_lease_of_a_step_longer_than_it() -> None:
    runs, clock = InMemoryRunStore(), SystemClock()
    host = SlowHost(runs, clock)
    engine = Engine(
        runs=runs,
        alarms=InMemoryAlarmClock(),
        dispatchers=DispatcherResolver(default=host),
        clock=clock,
        settings=CoreSettings(lease_ms=LEASE_MS),
    )
    record, _ = engine.trigger(TriggerSpec(workflow_id="wf", input=None, run_id="slow"))
    assert (record.status, record.output) == ("completed", "done")
    assert host.lease_at_answer is not None
    owner, expires_at, answered_at = host.lease_at_answer
    # Renewed every half second: still ours and alive after 2.5 s of a 1.5 s lease.
    assert owner.startswith(engine.owner + "/")
    assert expires_at > answered_at
    assert "relayflow-lease-keeper" in host.threads
