"""relayflow's own storage and alarms failing (DynamoDB, S3, Scheduler, SQS) never fail a run
with per-step checkpoints, and a crash re-runs no step but the one that was in flight.

A per-step run (sequential steps, one output kept in S3, a near sleep on the SQS queue, a map
of three branches, a far sleep on Scheduler) is run once without faults, recording every AWS
call. Then, for each call, again with that call failing as a whole (every attempt botocore
makes answered with a 5xx or throttling error: an outage outlasting its retries), and again
with the process killed at it, each in both modes (see ``fault_injection``). By default every
third call is swept per mode (the modes on different residues); ``RELAYFLOW_FAULT_SWEEP=full``
sweeps every call in both modes.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

import pytest
from fault_injection import (
    FAULT_MODES,
    CrashPlan,
    FaultMode,
    OutagePlan,
    RecordingSleep,
)
from reliability_cluster import QUEUE_SETTINGS, Cluster, Outcome
from reliability_tally import FULL_SWEEP, add, crash_point, run_lost
from reliability_workflows import LEDGER, runs_beyond

from relayflow.adapters.aws.checkpoints import DynamoDBCheckpointLog
from relayflow.adapters.aws.clients import AwsClients
from relayflow.adapters.aws.payloads import S3PayloadStore
from relayflow.api.metrics import RUNS_DRIVEN_AGAIN

KEY = "p"
RUN_ID = f"idem-reliability.per_step-{KEY}"
SWEPT_SERVICES = ("dynamodb", "s3", "scheduler", "sqs")


@pytest.fixture(scope="module")
def module_cluster(cluster_backend: None) -> Cluster:
    """The deployment of this module has an SQS alarm queue (near wake-ups go there); its
    sweeps pick calls by number, so its checkpoints are not grouped (the map's grouped
    writes depend on timing; tests/reliability/test_reliability_group_commit.py crashes
    those)."""
    return Cluster(settings=QUEUE_SETTINGS, group_checkpoints=False)


def run_per_step(cluster: Cluster) -> Outcome:
    """Trigger the per-step run (retried by its client) and recover it by the normal means."""
    cluster.client_call(
        lambda driver: driver.trigger("reliability.per_step", {}, idempotency_key=KEY)
    )
    cluster.finish(RUN_ID)
    return cluster.outcome(RUN_ID)


@dataclass(frozen=True)
class Baseline:
    """The fault-free run: its calls (and the sort key each wrote) and its outcome."""

    calls: list[str]
    written: list[str]
    outcome: Outcome


@pytest.fixture(scope="module")
def baseline(module_cluster: Cluster) -> Baseline:
    plan, outcome = module_cluster.fault_free(run_per_step)
    return Baseline(calls=list(plan.calls), written=list(plan.written), outcome=outcome)


def swept(baseline: Baseline, mode: FaultMode, keep: Callable[[str], bool]) -> list[int]:
    """The 1-based call numbers swept: every kept call, or every third (by mode)."""
    points = [n for n, call in enumerate(baseline.calls, 1) if keep(call)]
    if FULL_SWEEP:
        return points
    offset = 0 if mode == "refused" else 1
    return points[offset::3]


def storage_call(call: str) -> bool:
    return call.split(":")[0] in SWEPT_SERVICES


def test_the_fault_free_run_uses_every_backing_service_with_per_step_checkpoints(
    baseline: Baseline,
) -> None:
    services = {call.split(":")[0] for call in baseline.calls}
    assert set(SWEPT_SERVICES) <= services
    assert {"s3:PutObject", "sqs:SendMessage", "scheduler:CreateSchedule"} <= set(baseline.calls)
    checkpoints = [sk for sk in baseline.written if sk.startswith("log#")]
    assert len(checkpoints) >= 6  # one per step, map branches included
    assert baseline.outcome.status == "completed"
    assert baseline.outcome.output == {
        "first": 1,
        "large": 39_999,
        "squares": [4, 9, 16],
        "last": "done",
    }


def once_each() -> list[str]:
    """Step attempts that ran more than once (a transient error re-runs nothing)."""
    return [
        f"{step} #{attempt} ran {n}x" for (step, attempt), n in LEDGER.counts().items() if n > 1
    ]


# ----- a checkpoint write refused past botocore's retries -----------------------------------


@pytest.mark.parametrize("mode", FAULT_MODES)
@pytest.mark.parametrize(
    ("code", "status"), [("InternalServerError", 500), ("ThrottlingException", 400)]
)
def test_a_checkpoint_write_failing_past_its_retries_ends_the_invocation_and_the_run_completes(
    cluster: Cluster,
    baseline: Baseline,
    backoff: RecordingSleep,
    code: str,
    status: int,
    mode: FaultMode,
) -> None:
    LEDGER.reset()
    plan = OutagePlan(cluster.injector, mode=mode, fail_writes="log#", error=(code, status))
    cluster.use_plan(plan)

    outcome = run_per_step(cluster)

    assert plan.burst is not None
    add("storage_faults", plan.burst.injected)
    add(f"storage_faults_{mode}", plan.burst.injected)
    assert plan.fired
    assert backoff.delays  # botocore retried before giving up
    assert outcome == baseline.outcome
    assert not once_each()
    assert cluster.failed_invocations == 0  # the host ended its invocation; nothing raised
    assert cluster.metrics.counts[RUNS_DRIVEN_AGAIN] == 1
    add("runs_driven_again", cluster.metrics.counts[RUNS_DRIVEN_AGAIN])


@pytest.mark.parametrize(
    ("writes", "code", "message", "run_code", "named"),
    [
        (
            "log#",
            "AccessDeniedException",
            "User: arn:aws:sts::123456789012:assumed-role/drive is not authorized to perform: "
            "dynamodb:PutItem on resource: arn:aws:dynamodb:eu-west-1:123456789012:table/runs",
            "dynamodb_access_denied",
            "dynamodb:PutItem",
        ),
        (
            "#run",
            "ValidationException",
            "Item size has exceeded the maximum allowed size",
            "dynamodb_item_too_large",
            "400 KB",
        ),
    ],
    ids=["access-denied-checkpoint", "item-too-large-run"],
)
def test_a_request_refused_for_good_fails_the_run_with_a_code_naming_what_was_refused(
    cluster: Cluster,
    backoff: RecordingSleep,
    writes: str,
    code: str,
    message: str,
    run_code: str,
    named: str,
) -> None:
    LEDGER.reset()
    # botocore does not retry these: one answer fails the call. The run's first save (its
    # insert) is let through, so the refusal meets a run that exists.
    skip = 1 if writes == "#run" else 0
    cluster.injector.burst(
        "dynamodb:PutItem", code, 400, 1, message=message, writes=writes, after=skip
    )

    cluster.client_call(
        lambda driver: driver.trigger("reliability.per_step", {}, idempotency_key=KEY)
    )
    detail = cluster.finish(RUN_ID)

    add("storage_refusals")
    assert detail.status == "failed"
    assert detail.error is not None
    assert detail.error.code == run_code
    assert named in detail.error.message
    assert cluster.metrics.counts[RUNS_DRIVEN_AGAIN] == 0


# ----- every storage call failing once, past its retries ------------------------------------


def outage_once(cluster: Cluster, fail_at: int, mode: FaultMode) -> tuple[OutagePlan, Outcome]:
    """Run the per-step run once with call ``fail_at`` failing as a whole."""
    cluster.reset()
    LEDGER.reset()
    plan = OutagePlan(cluster.injector, fail_at=fail_at, mode=mode)
    cluster.use_plan(plan)
    return plan, run_per_step(cluster)


@pytest.mark.slow
@pytest.mark.parametrize("mode", FAULT_MODES)
def test_any_storage_call_failing_past_its_retries_never_fails_or_loses_the_run(
    cluster: Cluster, baseline: Baseline, backoff: RecordingSleep, mode: FaultMode
) -> None:
    failures: list[str] = []
    points = swept(baseline, mode, storage_call)
    redriven = 0
    for fail_at in points:
        plan, outcome = outage_once(cluster, fail_at, mode)
        call = baseline.calls[fail_at - 1]
        where = f"{mode} call #{fail_at} ({call} {baseline.written[fail_at - 1]})".rstrip()
        add("outage_points")
        add(f"outage_points_{mode}")
        add(f"outage_points_{call.split(':')[0]}")
        injected = plan.burst.injected if plan.burst is not None else 0
        add("storage_faults", injected)
        add(f"storage_faults_{mode}", injected)
        if not plan.fired:
            failures.append(f"{where}: the call was never failed")
            continue
        redriven += cluster.metrics.counts[RUNS_DRIVEN_AGAIN]
        if outcome != baseline.outcome:
            run_lost(mode)
            if outcome.error_code is not None:
                add("runs_failed_transient")
            failures.append(f"{where}: ended as {outcome}, expected {baseline.outcome}")
        rerun = once_each()
        if rerun:
            add("double_executions", len(rerun))
            failures.append(f"{where}: {'; '.join(rerun)}")
    add("runs_driven_again", redriven)
    assert not failures, "\n".join(failures)
    assert len(points) >= len([c for c in baseline.calls if storage_call(c)]) // 3
    assert redriven > 0
    assert backoff.delays


# ----- a crash at any call re-runs only the attempts in flight ------------------------------


class InFlight:
    """At the moment of a crash: the step attempts that had run and whose checkpoint had not
    landed (the only ones recovery may run again, once)."""

    def __init__(self, cluster: Cluster) -> None:
        clients = AwsClients(region=QUEUE_SETTINGS.region)
        payloads = S3PayloadStore(
            QUEUE_SETTINGS.require("payload_bucket"), client_factory=clients.s3
        )
        self._log = DynamoDBCheckpointLog(
            QUEUE_SETTINGS.require("table_name"),
            client_factory=clients.dynamodb,
            clock=cluster.clock,
            payload_store=payloads,
        )
        self.steps: frozenset[str] | None = None

    def __call__(self) -> None:
        ran = {step for (step, _), count in LEDGER.counts().items() if count}
        durable = {f"{RUN_ID}:{entry.key}" for entry in self._log.read(RUN_ID, 0) if entry.key}
        self.steps = frozenset(ran - durable)


def reruns_beyond_the_in_flight(
    counts: dict[tuple[str, int], int], in_flight: frozenset[str]
) -> list[str]:
    """Step attempts that ran again though their result was durable, or more than twice."""
    return runs_beyond(counts, lambda step: 2 if step in in_flight else 1)


@pytest.mark.slow
@pytest.mark.parametrize("mode", FAULT_MODES)
def test_a_crash_at_any_call_re_runs_only_the_step_in_flight(
    cluster: Cluster, baseline: Baseline, mode: FaultMode
) -> None:
    failures: list[str] = []
    points = swept(baseline, mode, lambda call: True)
    kinds: Counter[str] = Counter()
    for kill_at in points:
        cluster.reset()
        LEDGER.reset()
        in_flight = InFlight(cluster)
        plan = CrashPlan(kill_at=kill_at, mode=mode, on_fire=in_flight)
        cluster.use_plan(plan)
        outcome = run_per_step(cluster)
        where = f"{mode} call #{kill_at} ({baseline.calls[kill_at - 1]})"
        crash_point(mode)
        kinds[baseline.calls[kill_at - 1].split(":")[0]] += 1
        if not plan.fired or in_flight.steps is None:
            failures.append(f"{where}: the crash was never reached")
            continue
        add("crash_recoveries")
        if outcome != baseline.outcome:
            run_lost(mode)
            failures.append(f"{where}: ended as {outcome}, expected {baseline.outcome}")
        excess = reruns_beyond_the_in_flight(LEDGER.counts(), in_flight.steps)
        if excess:
            add("double_executions", len(excess))
            failures.append(f"{where}: {'; '.join(excess)}")
    assert not failures, "\n".join(failures)
    assert set(SWEPT_SERVICES) <= set(kinds) or not FULL_SWEEP
