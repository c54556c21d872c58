"""Admission of a run under its workflow's concurrency: what a trigger decides (start, queue,
refuse, replace the oldest holder) and who starts when a run ends.

The orchestrator calls these with its slots store; they hold the strategies in one place so
every driver applies them alike. A run waiting for a slot never breaks the limit, even under
``cancel-in-progress``: the new run queues first in line and the oldest holder is cancelled,
and its release hands the slot over. Under ``round-robin`` with a key, the slots are the
workflow's, the run queues under its key, and a release serves the keys in rotation.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from relayflow.flow.declarations import MAX_PRIORITY, Concurrency, TriggerOptions
from relayflow.flow.errors import CONCURRENCY_LIMITED
from relayflow.flow.keys import resolve_key
from relayflow.flow.ports import ConcurrencySlots, SlotScope
from relayflow.flow.status import KeyOccupancy, concurrency_line


@dataclass(frozen=True)
class Admission:
    """What a trigger decided for a concurrency-limited run.

    Attributes:
        scope: The (workflow, key) whose slots the run counts against.
        start: The run holds a slot and starts now.
        position: Its place in the queue when it waits (1 is next).
        in_use: Slots held when it was decided.
        limit: The workflow's limit.
        refused: The code the run ends ``cancelled`` with (``CONCURRENCY_LIMITED``), if the
            strategy refused it.
        replaces: The holder to cancel for this run (``cancel-in-progress``).
    """

    scope: SlotScope
    start: bool
    position: int | None
    in_use: int
    limit: int
    refused: str | None = None
    replaces: str | None = None

    def describe(self) -> str:
        """The status line a run view shows, e.g. ``queued (concurrency key acme: 5 of 5 in
        use)``."""
        state = "running" if self.start else "queued"
        if self.refused is not None:
            state = "cancelled"
        return concurrency_line(state, self.scope.key, KeyOccupancy(self.in_use, self.limit))


def concurrency_scope(
    workflow_id: str,
    concurrency: Concurrency,
    input: Any,
    options: TriggerOptions | None = None,
    event: Any = None,
) -> SlotScope:
    """The slots a run counts against: the trigger's ``concurrencyKey``, else the declared
    key resolved against the input (or event), else the whole workflow.

    Raises:
        FlowKeyMissingError: The declared key finds nothing in the input.
    """
    if options is not None and options.concurrency_key is not None:
        return SlotScope(workflow_id, options.concurrency_key)
    if concurrency.key is None:
        return SlotScope(workflow_id)
    return SlotScope(
        workflow_id, resolve_key(concurrency.key, input, event, what="concurrency key")
    )


def admit(
    slots: ConcurrencySlots,
    scope: SlotScope,
    run_id: str,
    concurrency: Concurrency,
    *,
    priority: int,
    now_ms: int,
) -> Admission:
    """Decide a new run's fate under ``concurrency``'s strategy (safe to repeat)."""
    limit = concurrency.limit
    if _rotates(scope, concurrency):
        grant = slots.acquire(
            SlotScope(scope.workflow_id),
            run_id,
            limit=limit,
            priority=priority,
            now_ms=now_ms,
            rotation_key=scope.key,
        )
        return Admission(scope, grant.held, grant.position, grant.in_use, limit)
    if concurrency.strategy == "cancel-newest":
        grant = slots.acquire(
            scope, run_id, limit=limit, priority=priority, now_ms=now_ms, wait=False
        )
        refused = None if grant.held or grant.position is not None else CONCURRENCY_LIMITED
        return Admission(scope, grant.held, grant.position, grant.in_use, limit, refused=refused)
    if concurrency.strategy == "cancel-in-progress":
        grant = slots.acquire(scope, run_id, limit=limit, priority=MAX_PRIORITY, now_ms=now_ms)
        replaces = None
        if not grant.held:
            holders = slots.holders(scope)
            replaces = holders[0].run_id if holders else None
        return Admission(scope, grant.held, grant.position, grant.in_use, limit, replaces=replaces)
    grant = slots.acquire(scope, run_id, limit=limit, priority=priority, now_ms=now_ms)
    return Admission(scope, grant.held, grant.position, grant.in_use, limit)


def release(
    slots: ConcurrencySlots,
    scope: SlotScope,
    run_id: str,
    concurrency: Concurrency,
    *,
    now_ms: int,
) -> list[str]:
    """The run ended (or left the queue): free its slot; the runs to start now."""
    return slots.release(
        stored_scope(scope, concurrency), run_id, limit=concurrency.limit, now_ms=now_ms
    )


def stored_scope(scope: SlotScope, concurrency: Concurrency) -> SlotScope:
    """Where the store keeps the slots and queue of a run's ``scope``: the workflow's for
    ``round-robin`` (one limit over every key), the scope itself otherwise."""
    return SlotScope(scope.workflow_id) if _rotates(scope, concurrency) else scope


def _rotates(scope: SlotScope, concurrency: Concurrency) -> bool:
    """Whether the run counts against its workflow's slots and queues under its key for the
    rotation (``round-robin`` with a key; without one it is ``queue``)."""
    return concurrency.strategy == "round-robin" and scope.key != ""
