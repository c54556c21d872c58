"""A batch's entry refers to its branches' entries; a timeline shows it with their values."""

from __future__ import annotations

import pytest

from relayflow.batch_entries import branch_key, counted, named_branches, with_copies
from relayflow.protocol import SerializedError, StepJournalEntry


def _ok(value: object) -> StepJournalEntry:
    return StepJournalEntry(status="ok", kind="branch", output=value)


def _err(message: str) -> StepJournalEntry:
    return StepJournalEntry(
        status="err", kind="branch", error=SerializedError(name="ValueError", message=message)
    )


def test_branch_keys_sit_in_the_batch_s_scope() -> None:
    assert branch_key("batch:m0", "7") == "branch:m0.7"
    assert branch_key("p0.left/batch:m1", "a") == "p0.left/branch:m1.a"


def test_positions_are_not_recorded_as_names() -> None:
    assert named_branches(["0", "1", "2"]) is None
    assert named_branches(["left", "right"]) == ["left", "right"]


def test_a_timeline_shows_a_map_entry_with_its_branches_values() -> None:
    steps = {"branch:m0.0": _ok(1), "branch:m0.1": _err("no"), "branch:m0.2": _ok("late")}
    output = {"outcomes": "oe-", "successCount": 1, "failureCount": 1}
    shown = with_copies("batch:m0", output, steps)
    assert shown["results"] == [1, None, None], "a branch not counted shows no result"
    assert [e and e["message"] for e in shown["errors"]] == [None, "no", None]
    assert shown["successCount"] == 1


def test_a_counted_branch_without_its_entry_is_refused() -> None:
    with pytest.raises(ValueError, match="no matching entry"):
        counted("oo", [_ok(1), None])
    with pytest.raises(ValueError, match="names 1 branches"):
        counted("o", [_ok(1), _ok(2)])


def test_an_entry_with_copies_is_shown_as_it_is() -> None:
    output = {"results": [1], "errors": [None]}
    assert with_copies("batch:m0", output, {}) is output
