"""A branch's end stored inside its last step's entry, in checkpoint groups and run pages.

A map item or parallel branch whose last operation is a step ends with an entry that
mostly repeats that step's: the same status, output, error, times and position, its kind
``branch`` and its name. Written together (in one checkpoint group, or one save's page
entries), the branch entry is left out and the step's stored value carries what the branch
entry has beyond what the step gives, under ``$branchEnd`` (usually ``{}``); reading puts
the branch entry back, right after its step. An item is billed per KB written, and a map of
one-step items stores each item's two entries twice (in the log and in the pages), so the
bytes of the second entry count for much of a map's writes.

The fold is lossless by construction: a pair is folded only when the branch entry read
back is exactly the one written (same keys, values of the same JSON types), and only when
no entry of the branch's key comes between them, so applying the entries in order gives
what it gave before. Anything else is written as it was."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

#: The key of a step's stored value that carries its branch's end (no field of a journal
#: entry is spelled with a ``$``).
END = "$branchEnd"
#: Fields of a branch entry that its last step's entry gives (the ordinal too: a map's first
#: operation is usually its items' first).
_FROM_STEP = ("status", "output", "error", "startedAt", "finishedAt", "ordinal")
_BRANCH = "branch"
_E = TypeVar("_E")


def _branch_of(step_key: str) -> str | None:
    """The key of the branch whose operation ``step_key`` would be (``m0.1/work`` →
    ``branch:m0.1``, ``p0.a/m1.x/work`` → ``p0.a/branch:m1.x``), or None for a key outside
    any scope."""
    scope, slash, _ = step_key.rpartition("/")
    if not slash:
        return None
    parent, sep, local = scope.rpartition("/")
    return f"{parent}{sep}{_BRANCH}:{local}"


def _given(step: dict[str, Any], branch_key: str) -> dict[str, Any]:
    """The branch entry as its step gives it (its name is the branch key's segment)."""
    given = {field: step[field] for field in _FROM_STEP if field in step}
    given["kind"] = _BRANCH
    given["name"] = branch_key.rpartition("/")[2].partition(".")[2]
    return given


def _same(a: Any, b: Any) -> bool:
    """JSON equality that tells types apart (``1``, ``1.0`` and ``true`` are different, and
    so are ``0.0`` and ``-0.0``)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(v, b[k]) for k, v in a.items())
    if isinstance(a, list):
        return len(a) == len(b) and all(map(_same, a, b))
    if isinstance(a, float):
        return repr(a) == repr(b)
    return bool(a == b)


def _end_of(step: dict[str, Any], branch: dict[str, Any], branch_key: str) -> dict[str, Any] | None:
    """What ``branch`` holds beyond what ``step`` gives, or None when it cannot be folded
    (the step carries an end already, or the branch lacks a field the step would give)."""
    if END in step or branch.get("kind") != _BRANCH:
        return None
    given = _given(step, branch_key)
    if not given.keys() <= branch.keys():
        return None
    return {
        field: value
        for field, value in branch.items()
        if field not in given or not _same(given[field], value)
    }


def fold(
    entries: Sequence[_E],
    key: Callable[[_E], str | None],
    value: Callable[[_E], dict[str, Any] | None],
    carrying: Callable[[_E, dict[str, Any]], _E],
) -> list[_E]:
    """``entries`` with each branch entry that can be folded left out and its end carried by
    its step's entry.

    Args:
        entries: The entries in the order they are applied.
        key: A step entry's key (None for an entry of another kind).
        value: A step entry's value (None when it cannot take part: a removal, a reference).
        carrying: A step entry with a branch's end added to its value.
    """
    keys = [key(entry) for entry in entries]
    out: dict[int, _E] = dict(enumerate(entries))
    for step, branch in _pairs(keys):
        if step not in out or branch not in out:
            continue
        branch_key = keys[branch]
        step_value, branch_value = value(entries[step]), value(entries[branch])
        if branch_key is None or step_value is None or branch_value is None:
            continue
        end = _end_of(step_value, branch_value, branch_key)
        if end is not None:
            out[step] = carrying(entries[step], end)
            del out[branch]
    return list(out.values())


def _pairs(keys: Sequence[str | None]) -> Iterator[tuple[int, int]]:
    """``(step index, branch index)`` of each branch entry and the latest entry before it of
    a step of that branch, when no entry of the branch's key comes in between."""
    latest_step: dict[str, int] = {}
    latest: dict[str, int] = {}
    for index, key in enumerate(keys):
        if key is None:
            continue
        step = latest_step.pop(key, None)
        if step is not None and latest.get(key, -1) < step:
            yield step, index
        latest[key] = index
        branch = _branch_of(key)
        if branch is not None:
            latest_step[branch] = index


def unfold(key: str, value: Any) -> Iterator[tuple[str, Any]]:
    """The entries a stored step value stands for: itself and, if it carries one, its
    branch's end."""
    if not isinstance(value, dict) or END not in value:
        yield key, value
        return
    end = value.pop(END)
    branch_key = _branch_of(key)
    yield key, value
    if branch_key is not None:
        yield branch_key, {**_given(value, branch_key), **end}
