"""The arithmetic of rate limits, debounce windows and the rotation of concurrency queues
over keys, shared by every store.

Stores keep the state these functions compute and write it back only if nobody changed it
meanwhile, so the rules live here once and each store adds only its conditional write.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from relayflow.flow.ports import DebounceDecision, QueuedRun, Reservation

# ---- concurrency queues: the rotation over keys ----------------------------------------------


def rotation_order(queued: list[QueuedRun], last_key: str | None) -> list[QueuedRun]:
    """The order queued runs take slots: one run per key in turn, starting with the first key
    (in key order) after ``last_key``, the key served last; within a key, the highest
    priority first, then the lowest arrival. With one key, that is priority-then-arrival."""
    by_key: dict[str, list[QueuedRun]] = {}
    for run in sorted(queued, key=lambda q: (-q.priority, q.arrival)):
        by_key.setdefault(run.key, []).append(run)
    keys = sorted(by_key)
    after_last = 0 if last_key is None else bisect.bisect_right(keys, last_key)
    turns = keys[after_last:] + keys[:after_last]
    rounds = max((len(runs) for runs in by_key.values()), default=0)
    return [by_key[key][turn] for turn in range(rounds) for key in turns if turn < len(by_key[key])]


# ---- rate limits: the generic cell rate algorithm ---------------------------------------------


@dataclass(frozen=True)
class LimiterState:
    """One key's limiter: its theoretical arrival time and the reservations still pending.

    Attributes:
        tat_ms: When the key's budget is fully free again (the theoretical arrival time).
        reservations: Reservation id to its slot, kept until the slot is a window old, so a
            repeated ``reserve`` answers the same slot.
    """

    tat_ms: int = 0
    reservations: dict[str, int] = field(default_factory=dict)


def emission_interval_ms(limit: int, window_ms: int, units: int) -> int:
    """The budget ``units`` take, rounded up so no call is ever admitted early."""
    return -(-window_ms * units // limit)


def reserve_slot(
    state: LimiterState,
    reservation_id: str,
    *,
    limit: int,
    window_ms: int,
    units: int,
    on_limit: Literal["queue", "fail"],
    now_ms: int,
) -> tuple[LimiterState, Reservation]:
    """Reserve ``units`` at the earliest conforming time.

    A burst of ``limit`` units is admitted at once (the slot is ``now``); after it, each
    unit's slot is ``window_ms / limit`` after the previous one. With ``fail``, a call that
    would have to wait reserves nothing and learns how long to wait.

    Returns:
        The new state (the same object when nothing changed) and the answer.
    """
    known = state.reservations.get(reservation_id)
    if known is not None:
        return state, Reservation(admitted=True, at_ms=known)
    tat = max(state.tat_ms, now_ms) + emission_interval_ms(limit, window_ms, units)
    at_ms = max(now_ms, tat - window_ms)
    if on_limit == "fail" and at_ms > now_ms:
        return state, Reservation(admitted=False, at_ms=at_ms, retry_after_ms=at_ms - now_ms)
    horizon = now_ms - window_ms
    kept = {rid: at for rid, at in state.reservations.items() if at >= horizon}
    kept[reservation_id] = at_ms
    return LimiterState(tat_ms=tat, reservations=kept), Reservation(admitted=True, at_ms=at_ms)


# ---- debounce windows --------------------------------------------------------------------------


@dataclass(frozen=True)
class Burst:
    """An open debounce burst.

    Attributes:
        run_id: The burst's run.
        mode: ``leading`` or ``trailing``.
        first_ms: Its first trigger.
        ends_ms: When it ends unless joined: the last trigger plus the delay, capped at the
            first trigger plus the maximum wait.
        start_ms: When its run starts (leading: the first trigger; trailing: ``ends_ms``).
        input: The run's input (trailing: the last trigger's).
        triggers: Triggers so far.
    """

    run_id: str
    mode: Literal["leading", "trailing"]
    first_ms: int
    ends_ms: int
    start_ms: int
    input: Any
    triggers: int = 1

    def decision(self, *, opened: bool) -> DebounceDecision:
        """The answer to a trigger that opened (or joined) this burst."""
        return DebounceDecision(
            run_id=self.run_id,
            opened=opened,
            start_at_ms=self.start_ms,
            input=self.input,
            triggers=self.triggers,
        )


def offer_trigger(
    burst: Burst | None,
    run_id: str,
    input: Any,
    *,
    delay_ms: int,
    mode: Literal["leading", "trailing"],
    max_wait_ms: int | None,
    now_ms: int,
) -> tuple[Burst, DebounceDecision]:
    """Join the open burst or open a new one with ``run_id``.

    A burst takes a trigger that comes before its ``ends_ms``. The burst's own run offered
    again answers as the opener again (nothing moves).
    """
    if burst is not None and burst.run_id == run_id and now_ms < burst.ends_ms:
        return burst, burst.decision(opened=True)
    if burst is None or now_ms >= burst.ends_ms:
        cap = now_ms + max_wait_ms if max_wait_ms is not None else None
        ends = min(now_ms + delay_ms, cap) if cap is not None else now_ms + delay_ms
        opened = Burst(
            run_id=run_id,
            mode=mode,
            first_ms=now_ms,
            ends_ms=ends,
            start_ms=now_ms if mode == "leading" else ends,
            input=input,
        )
        return opened, opened.decision(opened=True)
    ends = now_ms + delay_ms
    if max_wait_ms is not None:
        ends = min(ends, burst.first_ms + max_wait_ms)
    joined = replace(
        burst,
        ends_ms=ends,
        start_ms=burst.start_ms if burst.mode == "leading" else ends,
        input=burst.input if burst.mode == "leading" else input,
        triggers=burst.triggers + 1,
    )
    return joined, joined.decision(opened=False)


def closing(burst: Burst | None, run_id: str, now_ms: int) -> tuple[bool, int | None]:
    """Whether ``close`` ends the stored burst, and the start time to wait for instead.

    The burst's own run, not yet due (a join moved it): keep it and start at its new time.
    Otherwise the run starts now; the burst is removed only if it is the run's own.
    """
    if burst is None or burst.run_id != run_id:
        return False, None
    if burst.start_ms > now_ms:
        return False, burst.start_ms
    return True, None
