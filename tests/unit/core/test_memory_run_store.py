"""The in-memory run store keeps runs as text: nothing shared with readers or writers, and a
kept run costs the garbage collector nothing however long its journal is."""

from __future__ import annotations

import gc

from relayflow.adapters.memory import InMemoryRunStore
from relayflow.core.record import RunRecord
from relayflow.protocol import StepAttempt, StepJournalEntry

STEPS = 2_000


def long_run(run_id: str = "r1") -> RunRecord:
    record = RunRecord.model_validate({"id": run_id, "workflowId": "wf", "startedAt": 1})
    for i in range(STEPS):
        record.journal.step_results[f"s{i}"] = StepJournalEntry(
            status="ok",
            output={"i": i, "data": "x" * 100},
            started_at=i,
            finished_at=i + 1,
            attempts=[StepAttempt(attempt=1, status="ok", started_at=i, finished_at=i + 1)],
        )
    return record


def tracked_objects() -> int:
    gc.collect()
    return len(gc.get_objects())


def test_a_kept_run_adds_no_objects_for_the_garbage_collector_to_walk() -> None:
    store = InMemoryRunStore()
    before = tracked_objects()
    stored = store.try_insert(long_run())
    store.save(stored, expected_version=stored.version)
    del stored
    # A tree of documents would add several objects per journal entry.
    assert tracked_objects() - before < STEPS // 10


def test_a_saved_run_shares_nothing_with_its_writer_or_its_readers() -> None:
    store = InMemoryRunStore()
    saved = store.try_insert(long_run())
    saved.journal.step_results["s0"].output["i"] = "changed by the writer"
    read = store.get("r1")
    assert read is not None
    assert read.journal.step_results["s0"].output["i"] == 0
    read.journal.step_results.pop("s1")
    again = store.get("r1")
    assert again is not None and len(again.journal.step_results) == STEPS


def test_a_save_returns_the_record_at_its_new_version_as_a_read_gives_it() -> None:
    store = InMemoryRunStore()
    inserted = store.try_insert(long_run())
    saved = store.save(inserted.model_copy(update={"wake_at": 5}), expected_version=1)
    assert saved.version == 2
    assert store.get("r1") == saved
    assert store.due_runs(before_ms=5) == ["r1"]
