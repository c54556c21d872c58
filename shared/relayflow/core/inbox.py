"""Injections (events, signals, token outcomes), how they match waits, and the run inbox.

An injection no pending wait matches is buffered in the run's inbox (bounded, ordered,
deduplicated by id) and consumed by the first later wait that matches it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from relayflow.core.matching import matches
from relayflow.core.record import InboxItem, InjectionKind, RunRecord
from relayflow.errors import InboxFullError as InboxFullError
from relayflow.protocol import (
    SerializedError,
    Waitpoint,
    WaitpointRegistration,
    WaitpointResolution,
)

InjectionOutcome = Literal["deliver", "complete", "fail", "heartbeat"]
_KEY_FIELD = {"EVENT": "eventType", "SIGNAL": "signalName", "MANUAL": "tokenId"}


@dataclass(frozen=True)
class Injection:
    """Something delivered to one run from outside.

    Attributes:
        kind: ``EVENT``, ``SIGNAL`` or ``MANUAL`` (a token).
        key: The event type, signal name or token id.
        id: Deduplication id (an event id; tokens use ``token:<tokenId>``).
        payload: The value the wait resolves to.
        metadata: Event metadata, visible to ``match`` predicates.
        outcome: ``deliver`` (event/signal), ``complete``/``fail``/``heartbeat`` (token).
        error: The failure of a failed token.
        emitted_at: ISO time of the event, when known.
    """

    kind: InjectionKind
    key: str
    id: str
    payload: Any = None
    metadata: dict[str, Any] = field(default_factory=dict)
    outcome: InjectionOutcome = "deliver"
    error: SerializedError | None = None
    emitted_at: str | None = None

    def to_item(self, now: int) -> InboxItem:
        """The inbox form of this injection, received at ``now``."""
        return InboxItem(
            id=self.id,
            kind=self.kind,
            key=self.key,
            payload=self.payload,
            metadata=dict(self.metadata),
            received_at=now,
            outcome=self.outcome,
            error=self.error,
        )


@dataclass(frozen=True)
class InjectionResult:
    """What an injection did: ``resolved`` a wait, was ``buffered`` in the inbox, was a
    ``duplicate`` of one already seen, or was a token ``heartbeat``."""

    status: Literal["resolved", "buffered", "duplicate", "heartbeat"]
    waitpoint_id: str | None = None


def wait_key(wait: Waitpoint) -> str | None:
    """The key an injection must carry to resolve ``wait`` (None for other kinds)."""
    name = _KEY_FIELD.get(wait.kind)
    value = wait.meta.get(name) if name else None
    return value if isinstance(value, str) else None


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).isoformat().replace("+00:00", "Z")


def item_matches(
    wait: Waitpoint,
    registration: WaitpointRegistration | None,
    item: InboxItem,
    *,
    buffered: bool,
) -> bool:
    """True when ``item`` resolves ``wait``; buffered items must also be within ``lookback``."""
    if item.kind != wait.kind or item.outcome == "heartbeat" or wait_key(wait) != item.key:
        return False
    if buffered and registration is not None:
        lookback = wait.meta.get("lookback")
        if isinstance(lookback, int | float) and not isinstance(lookback, bool):
            oldest = registration.registered_at - int(lookback)
            if item.received_at < oldest:
                return False
    if wait.kind == "MANUAL":
        return True
    envelope = {
        "name": item.key,
        "data": item.payload,
        "metadata": item.metadata,
        "emittedAt": item.metadata.get("emittedAt", _iso(item.received_at)),
    }
    return matches(wait.meta.get("match"), envelope)


def resolution_for(item: InboxItem, now: int, *, buffered: bool) -> WaitpointResolution:
    """The resolution written when ``item`` resolves a wait."""
    return WaitpointResolution(
        kind=item.kind,
        resolved_at=now,
        payload=None if item.outcome == "fail" else item.payload,
        source="inbox" if buffered else "live",
        matched_event_id=item.id if item.kind == "EVENT" else None,
        error=item.error if item.outcome == "fail" else None,
    )


def is_seen(record: RunRecord, injection_id: str) -> bool:
    """True when an injection with this id was already consumed or is buffered."""
    return injection_id in record.seen_injection_ids or any(
        item.id == injection_id for item in record.inbox
    )


def remember(record: RunRecord, injection_id: str, limit: int) -> None:
    """Remember a consumed injection id (keeps the newest ``limit``; mutates ``record``)."""
    record.seen_injection_ids.append(injection_id)
    if len(record.seen_injection_ids) > limit:
        del record.seen_injection_ids[: len(record.seen_injection_ids) - limit]


def buffer(record: RunRecord, item: InboxItem, limit: int) -> None:
    """Append ``item`` to the inbox; raises ``InboxFullError`` when it holds ``limit`` items."""
    if len(record.inbox) >= limit:
        raise InboxFullError(
            f"run {record.id} has {len(record.inbox)} undelivered injections (the limit)"
        )
    record.inbox.append(item)


def take_from_inbox(
    record: RunRecord,
    wait: Waitpoint,
    registration: WaitpointRegistration | None,
    *,
    received_by: int | None = None,
) -> InboxItem | None:
    """Remove and return the oldest inbox item that resolves ``wait`` (mutates ``record``);
    with ``received_by``, only one received at or before that time."""
    for index, item in enumerate(record.inbox):
        if received_by is not None and item.received_at > received_by:
            continue
        if item_matches(wait, registration, item, buffered=True):
            del record.inbox[index]
            return item
    return None
