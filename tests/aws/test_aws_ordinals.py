"""Journal ordinals through the engine on atomic moto: stored with each checkpoint and page,
checked when a waiting run wakes under changed code, absent from journals written before;
and stored parts that leave out fields at their default, which pays for them."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from relayflow.adapters.aws import run_items
from relayflow.protocol import StepAttempt, StepJournalEntry
from relayflow.sdk import registry
from relayflow.testing import WorkflowTestEnv
from tests.aws.moto_driver import moto_driver
from tests.unit.sdk.ordinal_scenarios import (
    CHANGED,
    Calls,
    deploy_map,
    deploy_parallel,
    deploy_steps,
    park_then_change,
)


@pytest.fixture(autouse=True)
def own_registry() -> Iterator[None]:
    """Each test deploys its own versions of a workflow; other suites' come back after."""
    saved = dict(registry._REGISTRY)
    registry.reset_registry()
    yield
    registry.reset_registry()
    registry._REGISTRY.update(saved)


def _failure_data(env: WorkflowTestEnv, run_id: str) -> object:
    detail = env.get_run(run_id)
    assert detail.status == "failed", detail
    assert detail.error is not None and detail.error.code == "NON_DETERMINISM"
    return detail.error.data


def test_a_renamed_step_fails_at_its_ordinal_before_anything_runs_on_aws(aws: None) -> None:
    calls = Calls()
    env = moto_driver(workflows=[deploy_steps("first")], services={"calls": calls})
    run_id = park_then_change(env, calls, lambda: deploy_steps("renamed"))
    assert _failure_data(env, run_id) == {
        "ordinal": 0,
        "scope": "",
        "expected": {"id": "first", "kind": "step"},
        "found": {"id": "renamed", "kind": "step"},
    }
    assert calls.names == []
    logged = [(e.key, e.step.ordinal) for e in env.checkpoints.read(run_id, 0) if e.step]
    assert logged == [("first", 0), ("second", 1)]


def test_map_items_and_parallel_branches_are_checked_in_their_own_scopes_on_aws(
    aws: None,
) -> None:
    calls = Calls()
    env = moto_driver(workflows=[deploy_map("a")], services={"calls": calls})
    run_id = park_then_change(env, calls, lambda: deploy_map("a2"))
    data = _failure_data(env, run_id)
    assert isinstance(data, dict) and data["scope"] == "m0.0"
    assert data["expected"] == {"id": "m0.0/a", "kind": "step"}
    assert calls.names == []

    deploy_parallel(inserted=False)
    run_id = park_then_change(env, calls, lambda: deploy_parallel(inserted=True))
    data = _failure_data(env, run_id)
    assert isinstance(data, dict) and data["ordinal"] == 1
    assert data["expected"] == {"id": "batch:p0", "kind": "batch"}
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
    calls = Calls()
    env = moto_driver(workflows=[deploy_steps("first")], services={"calls": calls})
    run = env.trigger(CHANGED)
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
    calls = Calls()
    env = moto_driver(workflows=[deploy_steps("first")], services={"calls": calls})
    run = env.trigger(CHANGED)
    _strip_ordinals(env, run.id)
    deploy_steps("renamed")
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
    stored = json.loads(run_items.encode(entry))
    assert stored == {
        "status": "ok",
        "output": {"n": None},
        "startedAt": 5,
        "finishedAt": 6,
        "attempts": [{"attempt": 1, "status": "ok", "startedAt": 5, "finishedAt": 6}],
        "ordinal": 3,
    }
    assert StepJournalEntry.model_validate(stored) == entry
