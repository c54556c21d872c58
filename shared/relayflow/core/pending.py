"""Taking stored deliveries into a run's record.

A delivery to a run is first stored on its own (one write-once item per injection id, see
``ports.PendingDeliveries``); whoever next changes the run (its lease holder, or the delivery
itself when nobody holds the run) takes every stored one into the record with the save it
makes anyway. Taking is a pure transition: each delivery resolves a matching wait or joins
the inbox, exactly as if it had been injected on its own.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from relayflow.core.effects import Effect, Transition
from relayflow.core.inbox import Injection, InjectionResult, is_seen
from relayflow.core.interventions import inject
from relayflow.core.record import InboxItem, RunRecord
from relayflow.core.settings import CoreSettings
from relayflow.errors import InboxFullError
from relayflow.protocol import WaitpointResolution


@dataclass
class Taken:
    """What taking stored deliveries did.

    Attributes:
        transition: The record with the deliveries in it and the effects to apply after its
            save (``changed`` is False when nothing new was taken).
        results: What became of each delivery taken, by injection id.
        seen: Stored deliveries the record already holds (taken by an earlier save).
        refused: Stored deliveries the full inbox could not hold.
    """

    transition: Transition
    results: dict[str, InjectionResult] = field(default_factory=dict)
    seen: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)

    @property
    def settled(self) -> list[str]:
        """Every stored delivery this leaves nothing more to do for."""
        return [*self.results, *self.seen, *self.refused]


def injection_of(item: InboxItem) -> Injection:
    """The injection a stored delivery was made of."""
    return Injection(
        kind=item.kind,
        key=item.key,
        id=item.id,
        payload=item.payload,
        metadata=dict(item.metadata),
        outcome=item.outcome,
        error=item.error,
    )


def waits_on_timers_only(record: RunRecord) -> bool:
    """Whether no delivery could resolve one of the run's waits: it waits on timers only
    (sleeps, retry delays) or on nothing, so a stored delivery can wait for its next drive."""
    return all(wait.kind == "DATETIME" for wait in record.pending_waitpoints)


def take(record: RunRecord, items: Iterable[InboxItem], now: int, settings: CoreSettings) -> Taken:
    """Take ``items`` (in the order received) into ``record``; it must not have ended.

    The record is copied once, by the first item that changes it: the items after it change
    that copy in place, so taking n items costs one copy of the record, not n.
    """
    current = record
    effects: list[Effect] = []
    taken = Taken(Transition(record, (), changed=False))
    for item in sorted(items, key=lambda i: (i.received_at, i.id)):
        if is_seen(current, item.id):
            taken.seen.append(item.id)
            continue
        try:
            transition, result = inject(
                current, injection_of(item), now, settings, owned=current is not record
            )
        except InboxFullError:
            taken.refused.append(item.id)
            continue
        if transition.changed:
            current = transition.record
        effects.extend(transition.effects)
        taken.results[item.id] = result
    taken.transition = Transition(current, tuple(effects), changed=current is not record)
    return taken


def result_in(record: RunRecord, injection_id: str) -> InjectionResult | None:
    """What became of a delivery the record already holds (None if it holds none)."""
    if any(item.id == injection_id for item in record.inbox):
        return InjectionResult("buffered")
    if injection_id not in record.seen_injection_ids:
        return None
    resolved: dict[str, WaitpointResolution] = record.journal.waitpoints_resolved
    for waitpoint_id, resolution in resolved.items():
        if resolution.matched_event_id == injection_id:
            return InjectionResult("resolved", waitpoint_id)
    return InjectionResult("resolved")
