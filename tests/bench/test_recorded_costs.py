"""The usage a run records equals what the bench's independent meter counts for the same
run on the AWS driver (moto), apart from the final save that records it.

The meter sees every request of the session (botocore hooks) and prices DynamoDB writes
itself; the run's record carries what the orchestrator counted for it. The meter's tally is
taken as the final save starts: everything before it must be in the record, exactly; what the
meter counts after it is the final save's own work, which nothing records.
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
from relayflow.core.record import RunRecord
from relayflow.costs import RunUsage, cost_of

WORKLOADS = [
    pytest.param(workloads.SEQUENTIAL, {"steps": 10}, id="10 steps"),
    pytest.param(workloads.SLEEPY, {"steps": 3}, id="3 steps, 2 sleeps"),
    pytest.param(workloads.FANOUT, {"items": 6, "concurrency": 3}, id="map of 6"),
]


def _metered_run(
    workflow_id: str, data: dict[str, Any]
) -> tuple[RunRecord, Tally, Tally, RunUsage, MotoStack]:
    """Run a workflow; returns its final record, the meter's tally as its final save began
    and after it, the usage still pending for it and the stack."""
    with MotoStack() as st:
        store = st.driver.engine.runs
        save = store.save
        before_final: list[Tally] = []

        def watched_save(record: RunRecord, *, expected_version: int) -> RunRecord:
            if record.is_terminal:
                before_final.append(st.meter.tally.copy())
            return save(record, expected_version=expected_version)

        store.save = watched_save  # type: ignore[method-assign]
        started = st.trigger(workflow_id, data)
        st.run_until_idle()
        after, lambdas = st.take()
        record = store.get(started.id)
        assert record is not None
        left = st.clients.usage.pending(started.id)
    assert record.status == "completed"
    (before,) = before_final
    st.lambdas = lambdas  # type: ignore[attr-defined]
    return record, before, after, left, st


@pytest.mark.parametrize(("workflow_id", "data"), WORKLOADS)
def test_recorded_usage_is_what_the_meter_counts_up_to_the_final_save(
    workflow_id: str, data: dict[str, Any]
) -> None:
    record, before, after, left, st = _metered_run(workflow_id, data)
    usage = record.usage
    assert usage is not None
    lambdas = st.lambdas  # type: ignore[attr-defined]

    assert usage.dynamodb_write_units == before.write_units
    assert usage.dynamodb_read_units == before.read_units
    assert usage.dynamodb_requests == before.dynamodb_writes + before.dynamodb_reads
    assert usage.scheduler_invocations == before.count("scheduler.CreateSchedule")
    assert usage.scheduler_invocations == lambdas.alarm_drives
    assert usage.drive_invocations == lambdas.api + lambdas.alarm_drives + lambdas.handoff_drives
    assert usage.s3_puts == before.count("s3.PutObject")
    assert usage.s3_gets == before.count("s3.GetObject")
    assert usage.sqs_requests == before.count("sqs.*")
    assert usage.worker_invocations == 0  # the bench's step host runs in the process
    # The final save's own work is all that is left out (its header write, and the expiry
    # stamped on earlier pages), and nothing stays held for the ended run.
    final_requests = (after.dynamodb_writes + after.dynamodb_reads) - (
        before.dynamodb_writes + before.dynamodb_reads
    )
    assert 1 <= final_requests <= 2
    assert after.write_units > before.write_units
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
