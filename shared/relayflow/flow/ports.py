"""The ports of flow control: concurrency slots, rate limiters and debounce windows.

Each is keyed by a scope: for slots and debounce, the workflow id and the resolved key; for
rate limits, the limit's key. Every operation is safe to repeat: a retried ``acquire`` finds
the slot or queue place it already has, a retried ``reserve`` with the same reservation id
answers the slot it reserved, and a retried ``offer`` of the same run joins it again.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, Protocol

# ---- concurrency slots -----------------------------------------------------------------------


@dataclass(frozen=True)
class SlotScope:
    """Whose slots: one workflow, one resolved key (``""`` for a limit over the workflow)."""

    workflow_id: str
    key: str = ""


@dataclass(frozen=True)
class SlotGrant:
    """What ``acquire`` gave a run.

    Attributes:
        held: The run holds a slot and may start.
        position: Its place in the queue (1 is next) when it does not hold a slot.
        in_use: Slots held when it was answered (including this run's).
    """

    held: bool
    position: int | None
    in_use: int


@dataclass(frozen=True)
class SlotHolder:
    """A run holding a slot, since when (epoch ms)."""

    run_id: str
    since_ms: int


@dataclass(frozen=True)
class QueuedRun:
    """A run waiting for a slot: its priority and arrival number (lower came first), and the
    key it queues under when the slots rotate over keys (``""`` otherwise)."""

    run_id: str
    priority: int
    arrival: int
    queued_at_ms: int
    key: str = ""


class ConcurrencySlots(Protocol):
    """Slots per (workflow, key), shared by every host.

    A run asks once and holds a slot or waits in the key's queue. Whenever a slot frees, the
    queue's head takes it: the highest priority first, then the lowest arrival number (a
    counter per key, so arrival order does not depend on clocks). A new run never overtakes
    queued ones, even when the limit was raised since they queued.

    Runs acquired with a ``rotation_key`` queue under that key instead, and free slots go to
    the keys in rotation: to the next key (in key order, after the key served last) that has
    a queued run, then within the key by priority and arrival. The rotation is stored with
    the slots, so it holds across hosts.
    """

    def acquire(
        self,
        scope: SlotScope,
        run_id: str,
        *,
        limit: int,
        priority: int,
        now_ms: int,
        wait: bool = True,
        rotation_key: str | None = None,
    ) -> SlotGrant:
        """Take a slot if one is free and nobody is queued, else join the queue (with
        ``wait``) or answer not held with no position (without). With ``rotation_key``, the
        run queues under that key and takes its turn in the rotation over keys.

        Repeating it for a run that holds a slot or is queued answers its current state.
        """
        ...

    def release(self, scope: SlotScope, run_id: str, *, limit: int, now_ms: int) -> list[str]:
        """Free the run's slot (or take it out of the queue), then give free slots to the
        queue's head under ``limit`` (the workflow's current limit), or to the keys in
        rotation when runs queued with a ``rotation_key``.

        Also the operator's way to free a stuck slot. Repeating it changes nothing more: if
        the answer of a release that started runs is lost, the repeat answers nobody, and
        those runs show as holders (a sweep starts a holder whose run is still queued).

        Returns:
            The runs that now hold a slot and should start, in the order they took it.
        """
        ...

    def holders(self, scope: SlotScope) -> list[SlotHolder]:
        """The runs holding a slot, oldest first."""
        ...

    def queue(self, scope: SlotScope) -> list[QueuedRun]:
        """The queued runs, in the order they will take slots."""
        ...


# ---- rate limits -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Reservation:
    """What ``reserve`` answered.

    Attributes:
        admitted: A slot was reserved (always with ``queue``; with ``fail`` only when free now).
        at_ms: The reserved slot: the earliest time the call may run (``now`` or later).
        retry_after_ms: With ``fail`` and no slot free: ms until one would be.
    """

    admitted: bool
    at_ms: int
    retry_after_ms: int = 0


class RateLimiter(Protocol):
    """Rate limits per key with reservations (the generic cell rate algorithm).

    ``limit`` units are admitted per ``window_ms``: a burst of ``limit`` at once, then one unit
    every ``window_ms / limit``. Each reservation gets its own slot time, so waiting callers
    wake one at a time.
    """

    def reserve(
        self,
        key: str,
        reservation_id: str,
        *,
        limit: int,
        window_ms: int,
        units: int,
        on_limit: Literal["queue", "fail"],
        now_ms: int,
    ) -> Reservation:
        """Reserve ``units`` for ``reservation_id``; repeating it answers the same slot."""
        ...


# ---- debounce --------------------------------------------------------------------------------


@dataclass(frozen=True)
class DebounceDecision:
    """What ``offer`` decided for a trigger.

    Attributes:
        run_id: The burst's run: the offered run when it opened the burst, else the run it
            joined.
        opened: This trigger opened the burst (its run is the one to create).
        start_at_ms: When the burst's run starts (trailing: moved by every join).
        input: The input the run starts with (trailing: the last trigger's).
        triggers: Triggers in the burst so far.
    """

    run_id: str
    opened: bool
    start_at_ms: int
    input: Any
    triggers: int


class Debouncer(Protocol):
    """Open bursts per (workflow, key)."""

    def offer(
        self,
        scope: SlotScope,
        run_id: str,
        input: Any,
        *,
        delay_ms: int,
        mode: Literal["leading", "trailing"],
        max_wait_ms: int | None,
        now_ms: int,
    ) -> DebounceDecision:
        """Open a burst with ``run_id`` or join the open one (a trigger less than ``delay_ms``
        after the burst's last, before its ``max_wait_ms``)."""
        ...

    def close(self, scope: SlotScope, run_id: str, *, now_ms: int) -> int | None:
        """Called when the burst's run is due: end its burst and answer None (start now),
        or answer the later time a join moved its start to (wait for it instead). A run
        whose burst is gone or was replaced starts now."""
        ...

    def current(self, scope: SlotScope) -> DebounceDecision | None:
        """The open burst, if any (``opened`` False)."""
        ...
