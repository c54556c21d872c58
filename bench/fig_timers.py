"""Figure 6: timer precision and what a sleep costs on each alarm path.

* SQS path, measured in real time: the AWS driver on in-process moto with the alarm queue,
  the dev stack's local event source mapping (``LocalQueuePoller``) feeding the drive handler;
  runs sleeping 1 s, 10 s and 60 s all at once; lateness = the run's completion minus its
  wake time.
* Scheduler path, on a simulated clock: the engine and ``HorizonAlarmClock`` with a Scheduler
  model that fires each alarm at its ``at()`` second plus a uniform random delay of 0-60 s (AWS
  documents one-minute precision); with and without the early hand-off to the queue.
* Cost per sleep, metered on moto: the requests each path makes for one sleep (the alarm's
  arm, delivery and consumption; the run's own saves are the same on every path) priced at list
  prices, with the write units the sleep adds to the run.
"""

from __future__ import annotations

import contextlib
import random
import statistics
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from bench.moto_stack import REGION, SETTINGS, _session
from bench.table import Row, verdict

NAME = "timers"
FIGURE = "6 timers"
#: Sleeps of each length started together (real time: the 60 s ones bound the run).
SQS_SLEEPS = {1_000: 20, 10_000: 10, 60_000: 6}
QUICK_SQS_SLEEPS = {1_000: 5, 10_000: 3}
#: Simulated long sleeps through Scheduler.
SCHEDULER_SLEEPS = (20 * 60_000, 3_600_000, 86_400_000)
SIMULATED_RUNS = 200
STAGGER_S = 0.3
SCHEDULER_MAX_DELAY_MS = 60_000
TARGET_SQS_P99_MS = 1_000
TARGET_HANDOFF_P99_MS = 1_000

# List prices (us-east-1), dollars per request.
SQS_REQUEST = 0.40 / 1e6
SCHEDULER_INVOCATION = 1.00 / 1e6
LAMBDA_REQUEST = 0.20 / 1e6
LAMBDA_GB_SECOND_ARM64 = 0.0000133334
#: Billed time of one drive invocation woken by an alarm that finds nothing due (1 GB).
NOTHING_DUE_S = 0.020
DYNAMODB_WRITE_UNIT = 0.625 / 1e6
DYNAMODB_READ_UNIT = 0.125 / 1e6


def _register() -> None:
    from relayflow import workflow

    def sleeper(input: Any, ctx: Any) -> Any:
        ctx.sleep(int(input["ms"]))
        return None

    workflow(id="bench.timer")(sleeper)

    def quick(input: Any, ctx: Any) -> Any:
        return None

    workflow(id="bench.no-timer")(quick)


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[index]


# ----- SQS path, real time ------------------------------------------------------------------


def measure_sqs(sleeps: dict[int, int]) -> dict[int, list[float]]:
    """Lateness (ms) of each sleep length on the SQS path, in real time on moto."""
    from relayflow.adapters.aws import tables
    from relayflow.adapters.aws.clients import AwsClients
    from relayflow.adapters.aws.wiring import build_aws_driver
    from relayflow.api.metrics import DiscardedMetrics
    from relayflow.drive.handlers import make_drive_handler
    from relayflow.local.queue_poller import LocalQueuePoller
    from relayflow.testing.aws import mock_aws

    _register()
    lock = threading.Lock()  # one drive at a time, as one consumer of the queue would
    with mock_aws(config={"core": {"reset_boto3_session": False}}, region=REGION):
        session = _session()
        clients = AwsClients(session=session, region=REGION)
        queue_url = clients.sqs().create_queue(QueueName="relayflow-alarms")["QueueUrl"]
        settings = SETTINGS.__class__(**{**SETTINGS.__dict__, "alarm_queue_url": queue_url})
        tables.create_resources(clients, settings)
        driver = build_aws_driver(settings, clients=clients, on_due=lambda run_id, wake: None)
        drive = make_drive_handler(lambda: driver, metrics=DiscardedMetrics())

        def deliver(event: dict[str, Any]) -> Any:
            with lock:
                return drive(event, None)

        poller = LocalQueuePoller(client=clients.sqs(), queue_url=queue_url, deliver=deliver)
        poller.start()
        wakes: dict[str, tuple[int, int]] = {}

        def start(sleep_ms: int) -> None:
            with lock:
                run = driver.trigger("bench.timer", {"ms": sleep_ms})
                record = driver.engine.runs.get(run.id)
            assert record is not None and record.wake_at is not None
            wakes[run.id] = (sleep_ms, record.wake_at)

        try:
            # Repeated sleeps, one started every STAGGER_S (the short ones first): wake-ups due
            # in the same instant would measure how fast one consumer works through a batch on
            # moto (about 0.15 s per drive here), not how late the timer is.
            for sleep_ms, count in sorted(sleeps.items()):
                for _ in range(count):
                    start(sleep_ms)
                    time.sleep(STAGGER_S if sleep_ms > 1_000 else 1.2)
            deadline = time.monotonic() + max(sleeps) / 1000 + 30
            done: dict[str, int] = {}
            while len(done) < len(wakes) and time.monotonic() < deadline:
                time.sleep(0.25)
                with lock:
                    for run_id in set(wakes) - set(done):
                        found = driver.engine.runs.get(run_id)
                        if found is not None and found.completed_at is not None:
                            done[run_id] = found.completed_at
        finally:
            poller.stop()
    out: dict[int, list[float]] = {ms: [] for ms in sleeps}
    for run_id, (sleep_ms, wake_at) in wakes.items():
        out[sleep_ms].append(float(done[run_id] - wake_at) if run_id in done else float("inf"))
    return out


# ----- Scheduler path, simulated clock ------------------------------------------------------


class _DelayedScheduler:
    """A Scheduler model: an alarm armed for ``t`` fires at ``ceil_s(t) + U(0, 60 s)``."""

    def __init__(self, rng: random.Random) -> None:
        self.armed: dict[str, int] = {}
        self._rng = rng

    def arm(self, run_id: str, wake_at_ms: int) -> None:
        at = -(-wake_at_ms // 1000) * 1000
        self.armed[run_id] = at + self._rng.randint(0, SCHEDULER_MAX_DELAY_MS)

    def disarm(self, run_id: str, wake_at_ms: int | None = None) -> None:
        self.armed.pop(run_id, None)


class _Queue:
    """An SQS model: delivered ``ceil(delay)`` whole seconds after sending."""

    def __init__(self, now: Callable[[], int]) -> None:
        self.armed: dict[str, int] = {}
        self._now = now

    def arm(self, run_id: str, wake_at_ms: int) -> None:
        now = self._now()
        self.armed[run_id] = now + max(0, -(-(wake_at_ms - now) // 1000)) * 1000

    def disarm(self, run_id: str, wake_at_ms: int | None = None) -> None:
        """Messages cannot be taken back; a stale one finds nothing due."""


def simulate_scheduler(sleep_ms: int, *, handoff: bool, runs: int, seed: int = 7) -> list[float]:
    """Lateness (ms) of ``runs`` sleeps of ``sleep_ms`` through the Scheduler model."""
    from relayflow.adapters.aws.sqs_alarms import HorizonAlarmClock
    from relayflow.engine import Engine
    from relayflow.ports import AlarmClock, DispatcherResolver
    from relayflow.testing import WorkflowTestEnv

    _register()
    env = WorkflowTestEnv()
    rng = random.Random(seed)
    far = _DelayedScheduler(rng)
    near = _Queue(env.clock.now_ms)
    alarms: AlarmClock = far
    if handoff:
        alarms = HorizonAlarmClock(near=near, far=far, clock=env.clock)
    engine = Engine(
        runs=env.runs,
        alarms=alarms,
        dispatchers=DispatcherResolver(default=env.dispatcher),
        clock=env.clock,
    )
    wakes: dict[str, int] = {}
    for _ in range(runs):
        env.clock.advance(rng.randint(0, 300))  # starts spread over about a minute
        run_id = engine.new_run_id()
        from relayflow.core.trigger import TriggerSpec

        record, _ = engine.trigger(
            TriggerSpec(workflow_id="bench.timer", input={"ms": sleep_ms}, run_id=run_id)
        )
        assert record.wake_at is not None
        wakes[run_id] = record.wake_at
    lateness: list[float] = []
    while far.armed or near.armed:
        source, (run_id, due) = min(
            [(far, item) for item in far.armed.items()]
            + [(near, item) for item in near.armed.items()],
            key=lambda pair: pair[1][1],
        )
        del source.armed[run_id]
        env.clock.set(max(env.clock.now_ms(), due))
        engine.drive_from_event({"runId": run_id, "wakeAt": due})
    for run_id, wake in wakes.items():
        found = env.runs.get(run_id)
        assert found is not None and found.completed_at is not None
        lateness.append(float(found.completed_at - wake))
    return lateness


# ----- cost per sleep, metered on moto ----------------------------------------------------------


@dataclass(frozen=True)
class SleepCost:
    """Requests and units one sleep adds, on one path."""

    path: str
    requests: dict[str, int]
    lambda_invocations: int
    scheduler_invocations: int
    write_units: int
    read_units: float

    def dollars_per_million(self) -> float:
        sqs = sum(n for op, n in self.requests.items() if op.startswith("sqs."))
        lambda_cost = self.lambda_invocations * (
            LAMBDA_REQUEST + NOTHING_DUE_S * LAMBDA_GB_SECOND_ARM64
        )
        return 1e6 * (
            sqs * SQS_REQUEST
            + self.scheduler_invocations * SCHEDULER_INVOCATION
            + lambda_cost
            + self.write_units * DYNAMODB_WRITE_UNIT
            + self.read_units * DYNAMODB_READ_UNIT
        )


def measure_costs() -> list[SleepCost]:
    """One run with a sleep minus one without, on each path, metered on moto."""
    from bench.aws_meter import AwsMeter, table_specs
    from relayflow.adapters.aws import tables
    from relayflow.adapters.aws.clients import AwsClients
    from relayflow.adapters.aws.wiring import build_aws_driver
    from relayflow.clock import VirtualClock
    from relayflow.testing.aws import mock_aws

    _register()
    out: list[SleepCost] = []
    for path, sleep_ms, with_queue in (
        ("SQS (10 s sleep)", 10_000, True),
        ("Scheduler only (1 h sleep)", 3_600_000, False),
        ("Scheduler + hand-off (1 h sleep)", 3_600_000, True),
    ):
        with contextlib.ExitStack() as exits:
            exits.enter_context(
                mock_aws(config={"core": {"reset_boto3_session": False}}, region=REGION)
            )
            session = _session()
            meter = AwsMeter(
                session,
                table_specs(
                    [
                        (SETTINGS.require("table_name"), tables.RUNS_TABLE),
                        (SETTINGS.require("manifests_table"), tables.MANIFESTS_TABLE),
                    ]
                ),
            )
            clients = AwsClients(session=session, region=REGION)
            raw_sqs = _session().client("sqs")
            queue_url = raw_sqs.create_queue(QueueName="relayflow-alarms")["QueueUrl"]
            settings = SETTINGS.__class__(
                **{**SETTINGS.__dict__, "alarm_queue_url": queue_url if with_queue else None}
            )
            tables.create_resources(clients, settings)
            # Start at the wall clock: moto checks message retention against it.
            clock = VirtualClock(int(time.time() * 1000))
            # moto's SQS delays follow its own clock: let it read the virtual one.
            exits.enter_context(_moto_sqs_clock(clock))
            driver = build_aws_driver(
                settings, clients=clients, clock=clock, on_due=lambda run_id, wake: None
            )
            meter.reset()
            driver.trigger("bench.no-timer", {})
            baseline = meter.reset()
            lambdas = scheduler_fires = 0
            run = driver.trigger("bench.timer", {"ms": sleep_ms})
            unmetered = _session().client("scheduler")
            sqs = clients.sqs()
            for _ in range(10):
                record = driver.engine.runs.get(run.id)
                assert record is not None
                if record.completed_at is not None:
                    break
                found = _armed(driver, unmetered, run.id, settings.require("schedule_group"))
                if found is not None:
                    name, armed = found
                    # Scheduler fires (an invocation) and deletes the one-time schedule itself.
                    unmetered.delete_schedule(Name=name, GroupName=settings.schedule_group)
                    clock.set(_at_ms(armed["ScheduleExpression"]))
                    scheduler_fires += 1
                    lambdas += 1
                    driver.engine.drive_from_event({"runId": run.id})
                    continue
                # The event source mapping receives and deletes in batches of up to 10: one
                # receive and one delete per batch, shared by the messages of the batch.
                # Delays are whole seconds, rounded up: the message is visible within 1 s.
                clock.set((record.wake_at or clock.now_ms()) + 1_000)
                messages = sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10).get(
                    "Messages", []
                )
                lambdas += 1
                driver.engine.drive_from_event({"runId": run.id})
                sqs.delete_message_batch(
                    QueueUrl=queue_url,
                    Entries=[
                        {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]}
                        for i, m in enumerate(messages)
                    ],
                )
            tally = meter.reset()
        requests = {
            op: n - baseline.calls.get(op, 0)
            for op, n in tally.calls.items()
            if n - baseline.calls.get(op, 0)
        }
        out.append(
            SleepCost(
                path=path,
                requests=requests,
                lambda_invocations=lambdas,
                scheduler_invocations=scheduler_fires,
                write_units=tally.write_units - baseline.write_units,
                read_units=tally.read_units - baseline.read_units,
            )
        )
    return out


@contextlib.contextmanager
def _moto_sqs_clock(clock: Any) -> Iterator[None]:
    import moto.sqs.models as sqs_models

    original = sqs_models.unix_time_millis
    sqs_models.unix_time_millis = lambda *args: float(clock.now_ms())  # type: ignore[assignment]
    try:
        yield
    finally:
        sqs_models.unix_time_millis = original  # type: ignore[assignment]


def _armed(driver: Any, client: Any, run_id: str, group: str) -> tuple[str, Any] | None:
    """The run's earliest Scheduler alarm (name, schedule), read without metering, or None."""
    from relayflow.adapters.aws.alarms import run_prefix

    alarms = driver.engine.alarms
    prefix = run_prefix(run_id, getattr(alarms, "far", alarms).name_prefix)
    listed = client.list_schedules(GroupName=group, NamePrefix=prefix).get("Schedules", [])
    found = [
        (item["Name"], client.get_schedule(Name=item["Name"], GroupName=group)) for item in listed
    ]
    return min(found, key=lambda pair: str(pair[1]["ScheduleExpression"])) if found else None


def _at_ms(expression: str) -> int:
    from relayflow.schedules.times import expression_fire_times

    return expression_fire_times(expression, "UTC", None, 0, 1)[0]


# ----- rows ---------------------------------------------------------------------------------------


def rows(*, quick: bool) -> list[Row]:
    """Measure everything and return the figure's rows."""
    out: list[Row] = []
    sqs = measure_sqs(QUICK_SQS_SLEEPS if quick else SQS_SLEEPS)
    for sleep_ms, values in sqs.items():
        p99 = _percentile(values, 0.99)
        out.append(
            Row(
                FIGURE,
                f"SQS path lateness, {sleep_ms // 1000} s sleep (p50 / p99, {len(values)} runs, "
                "real time, local stack)",
                f"{statistics.median(values):.0f} / {p99:.0f} ms",
                f"p99 < {TARGET_SQS_P99_MS} ms",
                verdict(p99 < TARGET_SQS_P99_MS),
            )
        )
    runs = 50 if quick else SIMULATED_RUNS
    for sleep_ms in SCHEDULER_SLEEPS:
        label = _label(sleep_ms)
        plain = simulate_scheduler(sleep_ms, handoff=False, runs=runs)
        early = simulate_scheduler(sleep_ms, handoff=True, runs=runs)
        out.append(
            Row(
                FIGURE,
                f"Scheduler path lateness, {label} sleep, 0-60 s firing delay, no hand-off "
                f"(p50 / p99, {runs} runs, simulated)",
                f"{statistics.median(plain) / 1000:.1f} / {_percentile(plain, 0.99) / 1000:.1f} s",
            )
        )
        p99 = _percentile(early, 0.99)
        out.append(
            Row(
                FIGURE,
                f"Scheduler path lateness, {label} sleep, 0-60 s firing delay, early hand-off "
                f"(p50 / p99, {runs} runs, simulated)",
                f"{statistics.median(early):.0f} / {p99:.0f} ms",
                f"p99 < {TARGET_HANDOFF_P99_MS} ms",
                verdict(p99 < TARGET_HANDOFF_P99_MS),
            )
        )
    for cost in measure_costs():
        alarm_calls = ", ".join(
            f"{op} {n}"
            for op, n in sorted(cost.requests.items())
            if op.startswith(("sqs.", "scheduler."))
        )
        out.append(
            Row(
                FIGURE,
                f"one sleep, {cost.path}: {cost.lambda_invocations} drive + "
                f"{cost.scheduler_invocations} Scheduler invocation(s), {alarm_calls}; "
                f"{cost.write_units} WU, {cost.read_units:g} RU",
                f"${cost.dollars_per_million():.2f} per million sleeps",
            )
        )
    return out


def _label(ms: int) -> str:
    if ms % 86_400_000 == 0:
        return f"{ms // 86_400_000} d"
    if ms % 3_600_000 == 0:
        return f"{ms // 3_600_000} h"
    return f"{ms // 60_000} min"
