"""Ordinals: each journal entry's position among the operations of its scope.

A scope (the body, a group, a parallel branch, a map item) numbers the operations that
journal an entry (steps, groups, parallels and maps, tokens, conditions) from 0 in the order
the body reaches them, and each entry keeps its number (``StepJournalEntry.ordinal``). When a
replay reaches an operation, it is compared with what the journal holds at its number: a
different id or kind fails the invocation before the operation does anything, so code that
changed under a waiting run never runs against that run's history.

Waits are left out: their ids are already positional (``sleep:<n>``) and checked as such.
Operations an ``async`` body runs concurrently in one scope (``asyncio.gather``) are reached
in another order on replay, where journalled ones return without yielding; a scope stops
numbering (and checking) at the first operation reached from another task.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from relayflow.protocol import StepJournalEntry

_BRANCH_PREFIX = "branch:"
_BATCH_PREFIX = "batch:"


@dataclass(frozen=True)
class Operation:
    """An operation as the journal names it: its key and its entry ``kind``."""

    id: str
    kind: str

    def describe(self) -> str:
        """``step 'charge'``."""
        return f"{self.kind} {self.id!r}"

    def to_data(self) -> dict[str, str]:
        """The error data form."""
        return {"id": self.id, "kind": self.kind}


@dataclass(frozen=True)
class Divergence:
    """The body reached ``found`` as operation ``ordinal`` of ``scope``, where the journal has
    ``expected`` (``None``: nothing, and ``found`` is journalled at ``journalled_at``)."""

    scope: str
    ordinal: int
    found: Operation
    expected: Operation | None
    journalled_at: int | None = None

    def message(self) -> str:
        """What the run's error says."""
        where = f"scope {self.scope!r}" if self.scope else "the workflow body"
        if self.expected is not None:
            text = (
                f"operation #{self.ordinal} of {where} was journalled as "
                f"{self.expected.describe()} but the body now reaches {self.found.describe()} "
                "there"
            )
        else:
            text = (
                f"{self.found.describe()} was journalled as operation #{self.journalled_at} of "
                f"{where} but the body now reaches it as operation #{self.ordinal}"
            )
        return f"{text}; the code no longer matches the run, so it was stopped before running it"

    def data(self) -> dict[str, Any]:
        """The error data: the scope, the ordinal, the expected and the found operation."""
        data: dict[str, Any] = {
            "ordinal": self.ordinal,
            "scope": self.scope,
            "expected": self.expected.to_data() if self.expected is not None else None,
            "found": self.found.to_data(),
        }
        if self.journalled_at is not None:
            data["journalledAt"] = self.journalled_at
        return data


class ScopeOrder:
    """The numbering of one scope's operations during one invocation.

    Args:
        concurrent: Whether the body may reach operations from several tasks (an ``async``
            body); a plain ``def`` body reaches them one after the other.
    """

    __slots__ = ("_concurrent", "_next", "_task", "ordered")

    def __init__(self, *, concurrent: bool) -> None:
        self._concurrent = concurrent
        self._next = 0
        self._task: object | None = None
        #: False once an operation was reached from another task: no more numbers.
        self.ordered = True

    def take(self) -> int | None:
        """The number of the operation being reached, ``None`` once the scope is unordered."""
        if not self.ordered:
            return None
        if self._concurrent:
            task = asyncio.current_task()
            if self._next == 0:
                self._task = task
            elif task is not self._task:
                self.ordered = False
                return None
        number = self._next
        self._next += 1
        return number

    def upcoming(self) -> int | None:
        """The number the next operation reached here will take, ``None`` when the scope is
        unordered or the caller is not the task that numbers it."""
        if not self.ordered:
            return None
        if self._concurrent and self._next > 0 and asyncio.current_task() is not self._task:
            return None
        return self._next


def scope_of(key: str) -> str:
    """The path of the scope a journal key was made in (ids of a child scope are prefixed
    with its path and ``/``)."""
    return key.rpartition("/")[0]


def _holder(key: str, entry: StepJournalEntry) -> Operation:
    """The operation that holds ``entry``'s position: a branch's entry holds its batch's."""
    if entry.kind != "branch":
        return Operation(key, entry.kind)
    scope, slash, local = key.rpartition("/")
    batch = local.removeprefix(_BRANCH_PREFIX).split(".", 1)[0]
    return Operation(f"{scope}{slash}{_BATCH_PREFIX}{batch}", "batch")


class JournalOrder:
    """Checks operations against the journal's ordinals.

    Args:
        entries: The journal's step results; indexed by scope and ordinal when a check first
            needs the index (a replay that only meets journalled entries never does).
    """

    def __init__(self, entries: Mapping[str, StepJournalEntry]) -> None:
        self._entries = entries
        self._index: dict[tuple[str, int], list[Operation]] | None = None

    def _held(self, scope: str, ordinal: int) -> list[Operation]:
        if self._index is None:
            index: dict[tuple[str, int], list[Operation]] = {}
            for key, entry in self._entries.items():
                if entry.ordinal is not None:
                    at = (scope_of(key), entry.ordinal)
                    holder = _holder(key, entry)
                    if holder not in index.setdefault(at, []):
                        index[at].append(holder)
            self._index = index
        return self._index.get((scope, ordinal), [])

    def check(self, scope: str, ordinal: int, found: Operation) -> Divergence | None:
        """How reaching ``found`` as operation ``ordinal`` of ``scope`` departs from the
        journal, or ``None`` when it does not."""
        recorded = self._entries.get(found.id)
        if recorded is not None and recorded.ordinal is not None:
            if recorded.ordinal == ordinal:
                if recorded.kind == found.kind:
                    return None
                return Divergence(scope, ordinal, found, Operation(found.id, recorded.kind))
            held = self._held(scope, ordinal)
            expected = held[0] if held else None
            return Divergence(scope, ordinal, found, expected, journalled_at=recorded.ordinal)
        for holder in self._held(scope, ordinal):
            if holder != found:
                return Divergence(scope, ordinal, found, holder)
        return None
