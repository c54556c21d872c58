"""Journal ordinals through the engine on atomic moto: stored with each checkpoint and page,
checked when a waiting run wakes under changed code, absent from journals written before;
and stored parts that leave out fields at their default, which pays for them."""

from __future__ import annotations

import json

from relayflow.adapters.aws import attributes
from relayflow.protocol import StepAttempt, StepJournalEntry
from relayflow.testing import WorkflowTestEnv
from tests.aws.moto_driver import moto_driver
from tests.unit.sdk import ordinal_scenarios as scenarios
from tests.unit.sdk.sdk_harness import clean_registry  # noqa: F401


def _failure_data(env: WorkflowTestEnv, run_id: str) -> object:
    detail = env.get_run(run_id)
    assert detail.status == "failed", detail
    assert detail.error is not None and detail.error.code == "NON_DETERMINISM"
    return detail.error.data


def test_a_renamed_step_fails_at_its_ordinal_before_anything_runs_on_aws(aws: None) -> None:
    calls = scenarios.Calls()
    env = moto_driver(workflows=[scenarios.deploy_steps("first")], services={"calls": calls})
    run_id = scenarios.park_then_change(env, calls, lambda: scenarios.deploy_steps("renamed"))
    assert _failure_data(env, run_id) == scenarios.divergence(
        0, "", ("first", "step"), ("renamed", "step")
    )
    assert calls.names == []
    logged = [(e.key, e.step.ordinal) for e in env.checkpoints.read(run_id, 0) if e.step]
    # The body parked right after "second": the save that parked the run is its checkpoint.
    assert logged == [("first", 0)]
    stored = env.runs.get(run_id)
    assert stored is not None and stored.journal.step_results["second"].ordinal == 1


def test_map_items_and_parallel_branches_are_checked_in_their_own_scopes_on_aws(
    aws: None,
) -> None:
    calls = scenarios.Calls()
    env = moto_driver(workflows=[scenarios.deploy_map("a")], services={"calls": calls})
    run_id = scenarios.park_then_change(env, calls, lambda: scenarios.deploy_map("a2"))
    assert _failure_data(env, run_id) == scenarios.divergence(
        0, "m0.0", ("m0.0/a", "step"), ("m0.0/a2", "step")
    )
    assert calls.names == []

    scenarios.deploy_parallel(inserted=False)
    run_id = scenarios.park_then_change(
        env, calls, lambda: scenarios.deploy_parallel(inserted=True)
    )
    assert _failure_data(env, run_id) == scenarios.divergence(
        1, "", ("batch:p0", "batch"), ("inserted", "step")
    )
    assert calls.names == []


def _strip_ordinals(env: WorkflowTestEnv, run_id: str) -> None:
    """Store the run's journal as a host without ordinals wrote it."""
    record = env.runs.get(run_id)
    assert record is not None
    for entry in record.journal.step_results.values():
        entry.ordinal = None
    env.runs.save(record, expected_version=record.version)
    stored = env.runs.get(run_id)
    assert stored is not None
    assert {e.ordinal for e in stored.journal.step_results.values()} == {None}


def test_a_journal_stored_without_ordinals_replays_on_aws(aws: None) -> None:
    calls = scenarios.Calls()
    env = moto_driver(workflows=[scenarios.deploy_steps("first")], services={"calls": calls})
    run = env.trigger(scenarios.CHANGED)
    _strip_ordinals(env, run.id)
    calls.names.clear()
    env.advance("1h")
    assert env.get_run(run.id).status == "completed"
    assert calls.names == ["after"]
    record = env.runs.get(run.id)
    assert record is not None
    ordinals = {key: e.ordinal for key, e in record.journal.step_results.items()}
    assert ordinals == {"first": None, "second": None, "after": 2}


def test_a_journal_stored_without_ordinals_keeps_the_check_at_the_end_on_aws(
    aws: None,
) -> None:
    calls = scenarios.Calls()
    env = moto_driver(workflows=[scenarios.deploy_steps("first")], services={"calls": calls})
    run = env.trigger(scenarios.CHANGED)
    _strip_ordinals(env, run.id)
    scenarios.deploy_steps("renamed")
    calls.names.clear()
    env.advance("1h")
    detail = env.get_run(run.id)
    assert detail.status == "failed" and detail.error is not None
    assert detail.error.code == "NON_DETERMINISM" and "'first'" in detail.error.message
    assert calls.names == ["renamed", "after"]  # found only once the body finished


def test_stored_parts_leave_out_the_fields_at_their_default_and_read_back_equal() -> None:
    entry = StepJournalEntry(
        status="ok",
        output={"n": None},
        started_at=5,
        finished_at=6,
        attempts=[StepAttempt(attempt=1, status="ok", started_at=5, finished_at=6)],
        ordinal=3,
    )
    stored = json.loads(attributes.encode(entry))
    assert stored == {
        "status": "ok",
        "output": {"n": None},
        "startedAt": 5,
        "finishedAt": 6,
        "attempts": [{"attempt": 1, "status": "ok", "startedAt": 5, "finishedAt": 6}],
        "ordinal": 3,
    }
    assert StepJournalEntry.model_validate(stored) == entry
