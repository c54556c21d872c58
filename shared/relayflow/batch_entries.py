"""The journal entry of a batch (``ctx.map``, ``ctx.parallel``): how it counted each branch.

The entry gives one character per branch, in the batch's order: ``o`` (counted as
succeeded), ``e`` (counted as failed) or ``-`` (not counted: never started, or abandoned in
flight), and the branches' names unless they are their positions (``"0"``, ``"1"``, ... as
a map names its items by default). Results and errors stay in the branches' own entries, so
each value is stored once.
A batch recorded by an earlier version holds copies (``results``, ``errors``) instead.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from relayflow.protocol import SerializedError, StepJournalEntry

OUTCOMES_KEY = "outcomes"
BRANCHES_KEY = "branches"
SUCCEEDED, FAILED, NOT_COUNTED = "o", "e", "-"
_STATUS = {SUCCEEDED: "ok", FAILED: "err"}


def named_branches(segments: Sequence[str]) -> list[str] | None:
    """The branch names a batch entry records: None when they are their positions."""
    return None if all(s == str(i) for i, s in enumerate(segments)) else list(segments)


def branch_key(batch_key: str, segment: str) -> str:
    """The journal key of a batch's branch (``p0.left/batch:m1`` → ``p0.left/branch:m1.x``)."""
    scope, slash, local = batch_key.rpartition("/")
    return f"{scope}{slash}branch:{local.removeprefix('batch:')}.{segment}"


def counted(
    codes: str, branches: Sequence[StepJournalEntry | None]
) -> tuple[list[Any], list[dict[str, Any] | None]]:
    """The results (as dumped) and wire errors of the branches a batch counted.

    A branch the batch did not count has no result, even when its entry was recorded after
    the batch's.

    Raises:
        ValueError: The entry does not match the branches (another number of them, or a
            counted branch without its entry).
    """
    if len(codes) != len(branches):
        raise ValueError(f"batch entry names {len(codes)} branches, not {len(branches)}")
    results: list[Any] = []
    errors: list[dict[str, Any] | None] = []
    for code, branch in zip(codes, branches, strict=True):
        expected = _STATUS.get(code)
        if expected is not None and (branch is None or branch.status != expected):
            raise ValueError("a branch the batch entry counted has no matching entry")
        ok = branch is not None and code == SUCCEEDED
        failed = branch is not None and code == FAILED
        results.append(branch.output if ok and branch is not None else None)
        error = branch.error if failed and branch is not None else None
        if failed and error is None:
            error = SerializedError(name="RuntimeError", message="branch failed")
        errors.append(error.to_wire() if error is not None else None)
    return results, errors


def with_copies(batch_key: str, output: Any, steps: Mapping[str, StepJournalEntry]) -> Any:
    """A batch entry's output with its counted results and errors copied in (how a timeline
    shows it); any other value as it is."""
    if not isinstance(output, dict) or OUTCOMES_KEY not in output:
        return output
    codes = str(output[OUTCOMES_KEY])
    segments = output.get(BRANCHES_KEY, [str(i) for i in range(len(codes))])
    if not isinstance(segments, list):
        return output
    branches = [steps.get(branch_key(batch_key, str(s))) for s in segments]
    try:
        results, errors = counted(codes, branches)
    except ValueError:
        return output
    return {**output, "results": results, "errors": errors}
