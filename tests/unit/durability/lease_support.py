"""Scenarios of lease renewal, shared by the in-memory and the AWS (moto) tests: steps whose
work moves the virtual clock, a driver that dies inside one, a second process that sweeps,
delivers or takes over while the first one's invocation is in flight."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable
from typing import Any, TypeVar

from relayflow.core.inbox import Injection
from relayflow.core.record import RunRecord
from relayflow.engine import Engine
from relayflow.errors import StaleRunError
from relayflow.ports import DispatcherResolver, RunStore
from relayflow.sdk.registry import workflow
from relayflow.testing import WorkflowTestEnv, crash

T = TypeVar("T")

#: The step's work moves the clock in slices of this, as time passes during a real step.
SLICE_MS = 5_000
#: How often the deployed sweeper runs (the CDK construct's default).
SWEEP_PERIOD_MS = 60_000


MakeEnv = Callable[[dict[str, object]], WorkflowTestEnv]
MakeRival = Callable[[WorkflowTestEnv], Engine]


class LongSteps:
    """Step bodies: step ``n`` works ``work_ms[n]`` of virtual time; on its first call it may
    call ``during(n, worked_ms)`` after each slice, then crash the host if ``crash_at == n``."""

    def __init__(
        self,
        work_ms: dict[int, int],
        *,
        crash_at: int | None = None,
        during: Callable[[int, int], None] | None = None,
    ) -> None:
        self.work_ms = work_ms
        self.crash_at = crash_at
        self.during = during
        self.calls: Counter[int] = Counter()
        self.crashed_at: int | None = None
        self._env: WorkflowTestEnv | None = None

    def on(self, make_env: MakeEnv) -> WorkflowTestEnv:
        """A deployment hosting these steps."""
        self._env = make_env({"steps": self})
        return self._env

    @property
    def env(self) -> WorkflowTestEnv:
        assert self._env is not None
        return self._env

    def run(self, n: int) -> int:
        self.calls[n] += 1
        first = self.calls[n] == 1
        worked = 0
        while worked < self.work_ms.get(n, 0):
            self.env.clock.advance(SLICE_MS)
            worked += SLICE_MS
            if first and self.during is not None:
                self.during(n, worked)
        if first and n == self.crash_at:
            self.crashed_at = self.env.now()
            crash()
        return n


@workflow(id="lease.three")
def three(data: Any, ctx: Any) -> list[int]:
    steps: LongSteps = ctx.services.resolve("steps")
    return [ctx.step(f"s{n}", steps.run, n) for n in (1, 2, 3)]


@workflow(id="lease.then_event")
def then_event(data: Any, ctx: Any) -> Any:
    steps: LongSteps = ctx.services.resolve("steps")
    ctx.step("s1", steps.run, 1)
    return ctx.wait_for_event("go", timeout="1h")


class OtherClient:
    """Another process's client of the same in-memory store: what it saves is not counted
    as the first process's saves (:class:`SaveLog` wraps only the first one's)."""

    def __init__(self, runs: RunStore) -> None:
        self.get = runs.get
        self.get_header = runs.get_header
        self.try_insert = runs.try_insert
        self.save = runs.save
        self.list_runs = runs.list_runs
        self.due_runs = runs.due_runs


def other_process(env: WorkflowTestEnv, runs: RunStore | None = None) -> Engine:
    """Another driver of the same deployment, with its own identity and store client."""
    return Engine(
        runs=runs or OtherClient(env.runs),
        alarms=env.alarms,
        dispatchers=DispatcherResolver(default=env.dispatcher),
        clock=env.clock,
        settings=env.engine.settings,
        checkpoints=env.checkpoints,
    )


def elsewhere(action: Callable[[], T]) -> T:
    """Run ``action`` in a thread of its own (another process), wait for it, return its
    result or raise its error."""
    done: list[T] = []
    failed: list[BaseException] = []

    def target() -> None:
        try:
            done.append(action())
        except BaseException as exc:
            failed.append(exc)

    thread = threading.Thread(target=target)
    thread.start()
    thread.join()
    if failed:
        raise failed[0]
    return done[0]


def two_processes(
    steps: LongSteps, make_env: MakeEnv, make_rival: MakeRival
) -> tuple[WorkflowTestEnv, Engine, SaveLog]:
    """A deployment hosting ``steps``, a second process on it, and the first one's saves."""
    env = steps.on(make_env)
    rival = make_rival(env)
    return env, rival, SaveLog(env.runs)


class SaveLog:
    """Every save of a store, as (lease owner, lease expiry, refused), by wrapping it."""

    def __init__(self, runs: RunStore) -> None:
        self.saves: list[tuple[str | None, int | None, bool]] = []
        original = runs.save

        def save(record: RunRecord, *, expected_version: int) -> RunRecord:
            lease = record.lease
            owner, until = (lease.owner, lease.expires_at) if lease is not None else (None, None)
            try:
                saved = original(record, expected_version=expected_version)
            except StaleRunError:
                self.saves.append((owner, until, True))
                raise
            self.saves.append((owner, until, False))
            return saved

        runs.save = save  # type: ignore[method-assign]

    def by(self, engine: Engine) -> list[tuple[str | None, int | None, bool]]:
        """The saves whose record is leased to a drive of ``engine``."""
        return [s for s in self.saves if s[0] is not None and s[0].startswith(engine.owner + "/")]


# ----- scenarios ----------------------------------------------------------------------------


def a_dead_driver_s_run_is_re_driven_by_the_sweeper_within_the_lease(make_env: MakeEnv) -> None:
    # Step 2 works 45 s (the lease is renewed twice meanwhile), then its host dies.
    steps = LongSteps({2: 45_000}, crash_at=2)
    env = steps.on(make_env)
    lease_ms = env.engine.settings.lease_ms
    run = env.trigger("lease.three")
    assert run.status == "running" and steps.crashed_at is not None
    record = env.runs.get(run.id)
    assert record is not None and record.lease is not None
    lease_end = record.lease.expires_at
    assert steps.crashed_at < lease_end <= steps.crashed_at + lease_ms
    # Until the dead driver's lease ends, nobody takes the run.
    env.clock.set(lease_end - 1)
    env.sweep()
    assert env.get_run(run.id).status == "running" and steps.calls[2] == 1
    # The sweeper's next pass after the lease's end drives it again: at worst a lease plus a
    # sweep period after the crash, not the old 15-minute lease.
    env.clock.set(steps.crashed_at + lease_ms + SWEEP_PERIOD_MS)
    assert run.id in env.sweep()
    detail = env.get_run(run.id)
    assert (detail.status, detail.output) == ("completed", [1, 2, 3])
    assert [steps.calls[n] for n in (1, 2, 3)] == [1, 2, 1]


def a_step_longer_than_the_lease_under_a_live_driver_is_not_taken_over(
    make_env: MakeEnv, make_rival: MakeRival
) -> None:
    seen: list[int] = []

    def sweep_meanwhile(n: int, worked: int) -> None:
        # Another process sweeps every slice of a 5-minute step (five leases long).
        elsewhere(rival.sweep)
        record = rival.runs.get(run_id)
        assert record is not None and record.lease is not None
        assert record.lease.expires_at > env.now(), "the lease lapsed under a live driver"
        assert record.lease.owner.startswith(env.engine.owner + "/")
        seen.append(record.lease.expires_at)

    steps = LongSteps({2: 300_000}, during=sweep_meanwhile)
    env, rival, saves = two_processes(steps, make_env, make_rival)
    run_id = "run-long-step"
    run = env.trigger("lease.three", run_id=run_id)
    assert (run.status, run.output) == ("completed", [1, 2, 3])
    assert [steps.calls[n] for n in (1, 2, 3)] == [1, 1, 1]
    # No fence; the last step ends the body, so the save of the answer is its checkpoint.
    assert [e.kind for e in env.checkpoints.read(run_id, 0)] == ["step"] * 2
    record = env.runs.get(run_id)
    assert record is not None and record.invocation_count == 1
    # Renewed every third of the lease: 300 s / 20 s = 15 renewals, none by the rival.
    renewals = [s for s in saves.by(env.engine) if s[1] is not None]
    assert len(renewals) == 1 + 300_000 // (env.engine.settings.lease_ms // 3)
    # The answer's save was conditional on the last renewal's version: no save lost a race.
    assert not [save for save in saves.by(env.engine) if save[2]]
    assert not saves.by(rival)
    assert seen == sorted(seen) and len(set(seen)) > 10


def a_stale_renewal_fails_and_its_driver_stops(make_env: MakeEnv, make_rival: MakeRival) -> None:
    taken: list[int] = []

    def take_over(n: int, worked: int) -> None:
        if worked == SLICE_MS:
            # The first driver looks dead to another process, which takes the run over and
            # finishes it while the first one's step is still running.
            taken.append(len(saves.by(env.engine)))
            elsewhere(lambda: rival.recover(run_id))

    steps = LongSteps({2: 60_000}, during=take_over)
    env, rival, saves = two_processes(steps, make_env, make_rival)
    run_id = "run-stale-renewal"
    env.trigger("lease.three", run_id=run_id)
    detail = env.get_run(run_id)
    assert (detail.status, detail.output) == ("completed", [1, 2, 3])
    ours = saves.by(env.engine)
    after = ours[taken[0] :]
    # The first driver's next renewal was refused (the run had moved on), and it wrote
    # nothing after: it renews no more and saves none of its answer.
    assert len(after) == 1 and after[0][2], f"expected one refused renewal, got {after}"
    # Its host stopped at the fence (step 3 ran once, by the second driver).
    assert [steps.calls[n] for n in (1, 2, 3)] == [1, 2, 1]


def a_delivery_during_a_long_step_does_not_cost_the_lease(
    make_env: MakeEnv, make_rival: MakeRival
) -> None:

    def deliver(n: int, worked: int) -> None:
        if worked == 30_000:  # after the first renewal, before the second
            event = Injection(kind="EVENT", key="go", id="evt-1", payload={"ok": True})
            result, _ = elsewhere(lambda: rival.inject(run_id, event))
            assert result.status == "buffered"
            stored = rival.runs.get(run_id)
            assert stored is not None and stored.dirty

    steps = LongSteps({1: 90_000}, during=deliver)
    env, rival, saves = two_processes(steps, make_env, make_rival)
    run_id = "run-delivered"
    run = env.trigger("lease.then_event", run_id=run_id)
    assert (run.status, run.output) == ("completed", {"ok": True})
    assert steps.calls[1] == 1
    ours = saves.by(env.engine)
    refused = [s for s in ours if s[2]]
    # The renewal after the delivery lost its race once, read the run again and renewed
    # over the delivery; the answer's save then succeeded on the renewed version.
    assert len(refused) == 1
    assert [s for s in ours if not s[2] and s[1] is not None]


def a_short_invocation_pays_no_renewal(make_env: MakeEnv) -> None:
    steps = LongSteps({1: 15_000})  # under a third of the lease
    env = steps.on(make_env)
    saves = SaveLog(env.runs)
    run = env.trigger("lease.three")
    assert run.status == "completed"
    # One save to start the invocation (with the lease), one with its answer (without).
    assert [(owner is not None, refused) for owner, _, refused in saves.saves] == [
        (True, False),
        (False, False),
    ]


def a_cancel_during_a_long_step_ends_the_holder_s_renewals(
    make_env: MakeEnv, make_rival: MakeRival
) -> None:
    cancelled: list[int] = []

    def cancel(n: int, worked: int) -> None:
        if worked == 30_000:  # after the first renewal, before the second
            record = elsewhere(lambda: rival.cancel(run_id, reason="no longer needed"))
            cancelled.append(record.version)

    steps = LongSteps({1: 60_000}, during=cancel)
    env, rival, saves = two_processes(steps, make_env, make_rival)
    run_id = "run-cancelled"
    env.trigger("lease.three", run_id=run_id)
    record = env.runs.get(run_id)
    assert record is not None and record.status == "cancelled"
    # The renewal after the cancel lost its race, read the run again, found it ended and
    # stopped: the holder saved nothing more (the run is as the cancel left it).
    assert record.version == cancelled[0]
    ours = saves.by(env.engine)
    assert [refused for _, _, refused in ours] == [False, False, True]
