"""In-memory flow control (one process): concurrency slots, rate limiters and debounce
windows, each a dict guarded by a lock, with the rules of ``relayflow.flow.rules``."""

from __future__ import annotations

import copy
import threading
from dataclasses import dataclass, field
from typing import Any, Literal

from relayflow.flow.ports import (
    DebounceDecision,
    QueuedRun,
    Reservation,
    SlotGrant,
    SlotHolder,
    SlotScope,
)
from relayflow.flow.rules import (
    Burst,
    LimiterState,
    closing,
    offer_trigger,
    reserve_slot,
    rotation_order,
)


@dataclass
class _Slots:
    holders: dict[str, int] = field(default_factory=dict)
    queued: dict[str, QueuedRun] = field(default_factory=dict)
    arrivals: int = 0
    last_key: str | None = None

    def ordered_queue(self) -> list[QueuedRun]:
        return rotation_order(list(self.queued.values()), self.last_key)


class InMemoryConcurrencySlots:
    """The :class:`~relayflow.flow.ports.ConcurrencySlots` port in memory."""

    def __init__(self) -> None:
        self._scopes: dict[SlotScope, _Slots] = {}
        self._lock = threading.Lock()

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
        """Hold a slot if one is free and nobody is queued, else queue (see the port)."""
        with self._lock:
            slots = self._scopes.setdefault(scope, _Slots())
            if run_id not in slots.holders and run_id not in slots.queued:
                if len(slots.holders) < limit and not slots.queued:
                    slots.holders[run_id] = now_ms
                    if rotation_key is not None:
                        slots.last_key = rotation_key
                elif not wait:
                    return SlotGrant(held=False, position=None, in_use=len(slots.holders))
                else:
                    slots.arrivals += 1
                    slots.queued[run_id] = QueuedRun(
                        run_id, priority, slots.arrivals, now_ms, key=rotation_key or ""
                    )
            if run_id in slots.holders:
                return SlotGrant(held=True, position=None, in_use=len(slots.holders))
            order = [q.run_id for q in slots.ordered_queue()]
            return SlotGrant(
                held=False, position=order.index(run_id) + 1, in_use=len(slots.holders)
            )

    def release(self, scope: SlotScope, run_id: str, *, limit: int, now_ms: int) -> list[str]:
        """Free the run's slot or queue place, then fill free slots from the queue."""
        with self._lock:
            slots = self._scopes.get(scope)
            if slots is None:
                return []
            slots.holders.pop(run_id, None)
            slots.queued.pop(run_id, None)
            started: list[str] = []
            for head in slots.ordered_queue():
                if len(slots.holders) >= limit:
                    break
                del slots.queued[head.run_id]
                slots.holders[head.run_id] = now_ms
                slots.last_key = head.key
                started.append(head.run_id)
            return started

    def holders(self, scope: SlotScope) -> list[SlotHolder]:
        """The runs holding a slot, oldest first."""
        with self._lock:
            slots = self._scopes.get(scope, _Slots())
            held = sorted(slots.holders.items(), key=lambda h: (h[1], h[0]))
            return [SlotHolder(run_id, since) for run_id, since in held]

    def queue(self, scope: SlotScope) -> list[QueuedRun]:
        """The queued runs, next first."""
        with self._lock:
            return self._scopes.get(scope, _Slots()).ordered_queue()


class InMemoryRateLimiter:
    """The :class:`~relayflow.flow.ports.RateLimiter` port in memory."""

    def __init__(self) -> None:
        self._keys: dict[str, LimiterState] = {}
        self._lock = threading.Lock()

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
        """Reserve ``units`` for ``reservation_id`` (see the port)."""
        with self._lock:
            state, answer = reserve_slot(
                self._keys.get(key, LimiterState()),
                reservation_id,
                limit=limit,
                window_ms=window_ms,
                units=units,
                on_limit=on_limit,
                now_ms=now_ms,
            )
            self._keys[key] = state
            return answer


class InMemoryDebouncer:
    """The :class:`~relayflow.flow.ports.Debouncer` port in memory."""

    def __init__(self) -> None:
        self._bursts: dict[SlotScope, Burst] = {}
        self._lock = threading.Lock()

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
        """Open a burst or join the open one (see the port)."""
        with self._lock:
            burst, decision = offer_trigger(
                self._bursts.get(scope),
                run_id,
                copy.deepcopy(input),
                delay_ms=delay_ms,
                mode=mode,
                max_wait_ms=max_wait_ms,
                now_ms=now_ms,
            )
            self._bursts[scope] = burst
            return decision

    def close(self, scope: SlotScope, run_id: str, *, now_ms: int) -> int | None:
        """End the run's burst when it is due (see the port)."""
        with self._lock:
            ends, later = closing(self._bursts.get(scope), run_id, now_ms)
            if ends:
                del self._bursts[scope]
            return later

    def current(self, scope: SlotScope) -> DebounceDecision | None:
        """The open burst, if any."""
        with self._lock:
            burst = self._bursts.get(scope)
            return None if burst is None else burst.decision(opened=False)
