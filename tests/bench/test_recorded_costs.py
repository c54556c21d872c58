"""The usage a run records equals what the bench's independent meter counts for the same
run on the AWS driver (moto), apart from what follows the final save that records it.

The meter sees every request of the session (botocore hooks) and prices DynamoDB writes
itself; the run's record carries what the orchestrator counted for it. A save prices its own
writes before it makes them, so the meter's tally is taken as the final save's header write
returns: everything up to it must be in the record, exactly; what the meter counts after it
(the expiry stamped on earlier pages, the workflow statistics) is all the record leaves out.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench import workloads
from bench.aws_meter import Tally
from bench.moto_stack import MotoStack
from relayflow.core.record import TERMINAL_STATUSES, RunRecord
from relayflow.costs import RunUsage, cost_of

WORKLOADS = [
    pytest.param(workloads.SEQUENTIAL, {"steps": 10}, 1, id="10 steps"),
    pytest.param(workloads.SLEEPY, {"steps": 3}, 1, id="3 steps, 2 sleeps"),
    pytest.param(workloads.FANOUT, {"items": 6, "concurrency": 3}, 1, id="map of 6"),
    # Each wake-up in another process than the one before (Lambda containers): nothing a
    # process counted may wait in its memory for a save another process makes.
    pytest.param(workloads.SLEEPY, {"steps": 4}, 2, id="4 steps, 3 sleeps, two processes"),
    pytest.param(workloads.SLEEPY, {"steps": 4}, 3, id="4 steps, 3 sleeps, three processes"),
]


def _metered_run(
    workflow_id: str, data: dict[str, Any], *, containers: int = 1
) -> tuple[RunRecord, Tally, Tally, RunUsage, MotoStack]:
    """Run a workflow (its alarms delivered in turn to ``containers`` processes); returns its
    final record, the meter's tally as its final header write returned and after the run,
    the usage still pending for it in any process and the stack."""
    with MotoStack(containers=containers) as st:
        at_final: list[Tally] = []
        for _, driver in st.containers:
            _watch_final_header(driver.engine.runs, st, at_final)
        started = st.trigger(workflow_id, data)
        st.run_until_idle()
        after, lambdas = st.take()
        record = st.driver.engine.runs.get(started.id)
        assert record is not None
        left = RunUsage()
        for clients, _ in st.containers:
            left = left.plus(clients.usage.pending(started.id))
    assert record.status == "completed"
    (final,) = at_final
    st.lambdas = lambdas  # type: ignore[attr-defined]
    return record, final, after, left, st


def _watch_final_header(store: Any, st: MotoStack, at_final: list[Tally]) -> None:
    """Note the meter's tally when the header write that ends the run returns."""
    put_header = store._put_header

    def watched(run_id: str, request: dict[str, Any]) -> None:
        put_header(run_id, request)
        if request["Item"]["status"]["S"] in TERMINAL_STATUSES:
            at_final.append(st.meter.tally.copy())

    store._put_header = watched


@pytest.mark.parametrize(("workflow_id", "data", "containers"), WORKLOADS)
def test_recorded_usage_is_what_the_meter_counts_up_to_the_final_save(
    workflow_id: str, data: dict[str, Any], containers: int
) -> None:
    record, before, after, left, st = _metered_run(workflow_id, data, containers=containers)
    usage = record.usage
    assert usage is not None
    lambdas = st.lambdas  # type: ignore[attr-defined]

    # No DynamoDB request is held in another process's memory: the one that may follow a
    # parking save, the look for stored deliveries, is made only after a run that waits for
    # a delivery or was marked while held; these runs sleep, unmarked.
    held = left if containers > 1 else RunUsage()
    assert not (held.dynamodb_requests or held.dynamodb_write_units or held.dynamodb_read_units)
    assert usage.dynamodb_write_units == before.write_units
    assert usage.dynamodb_read_units == before.read_units
    assert usage.dynamodb_requests == before.dynamodb_writes + before.dynamodb_reads
    # An alarm is counted by the drive it fires (in whichever process), not when armed.
    assert usage.scheduler_invocations == lambdas.alarm_drives
    assert usage.drive_invocations == lambdas.api + lambdas.alarm_drives + lambdas.handoff_drives
    assert usage.s3_puts == before.count("s3.PutObject")
    assert usage.s3_gets == before.count("s3.GetObject")
    assert usage.sqs_requests == before.count("sqs.*")
    assert usage.worker_invocations == 0  # the bench's step host runs in the process
    # What follows the final save is all that is left out (the expiry stamped on earlier
    # pages, the workflow statistics' one-item transaction), and nothing stays held for the
    # ended run.
    following = after.calls - before.calls
    assert set(following) <= {
        "dynamodb.Query",
        "dynamodb.BatchWriteItem",
        "dynamodb.TransactWriteItems",
        "scheduler.DeleteSchedule",
    }
    assert following["dynamodb.TransactWriteItems"] == 1
    if containers == 1:
        assert left.is_empty
    assert cost_of(usage).total > 0


def test_the_bookkeeping_adds_no_write_to_a_run() -> None:
    """Recording usage rides on the saves: a run makes the same DynamoDB write requests as
    with nothing recorded (the same workload, measured with the recording left out)."""
    record, _, after, _, _ = _metered_run(workloads.SEQUENTIAL, {"steps": 10})
    assert record.usage is not None
    with MotoStack() as st:
        st.driver.engine.runs._usage = None  # records keep the usage they are given: none
        st.run(workloads.SEQUENTIAL, {"steps": 10})
        unrecorded, _ = st.take()
    assert after.dynamodb_writes == unrecorded.dynamodb_writes
