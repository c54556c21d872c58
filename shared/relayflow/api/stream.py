"""A run's journal as a numbered feed, read with a long poll (``GET /api/runs/{id}/stream``).

API Gateway's HTTP API cannot stream a response and cuts every request at 30 s, so live views
ask for "the events after ``seq`` N, waiting up to ``waitMs`` for one or for a change of the
run's status". The feed is derived
from the run alone (no extra writes): every step attempt contributes a ``started`` event and,
once it ends, its outcome; every wait a ``pending`` event and its resolution; every stream
chunk one event; a finished run one final ``status`` event. Events are numbered in time order,
so a client that passes back ``next`` gets only what it has not seen.

The wait itself follows the admin's ``stream_run``: it blocks on the run store's change
notification where the store has one and polls otherwise.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Literal

from pydantic import Field

from relayflow.api.model_bases import ResponseModel
from relayflow.api.models import RunErrorView, RunStatus
from relayflow.api.views import error_view
from relayflow.core.views import RunDetail, TimelineEntry
from relayflow.errors import RunNotFoundError

#: Longest time one stream request may wait for a new event (API Gateway cuts at 30 s).
MAX_STREAM_WAIT_MS = 20_000

_TERMINAL = frozenset({"completed", "failed", "cancelled", "compensated", "compensation_failed"})

EventKey = tuple[str, str | None, int | None, str]


class JournalEventView(ResponseModel):
    """One numbered event of a run's journal."""

    seq: int = Field(description="1-based position in the run's feed; pass the last as after")
    at: int = Field(description="epoch milliseconds")
    type: Literal["step", "wait", "action", "stream_chunk", "status"]
    id: str | None = Field(default=None, description="the step, wait, action or stream id")
    attempt: int | None = Field(default=None, description="step attempt, or stream chunk seq")
    kind: str | None = Field(
        default=None,
        description="the wait's kind (DATETIME, EVENT, ...); the action's (pause, resume, ...)",
    )
    status: str = Field(
        description="started, ok, err or retrying (steps); pending, resolved, timed_out or "
        "error (waits); applied (actions); chunk or final (streams); the run's final status "
        "(status)"
    )
    source: str | None = None
    error: RunErrorView | None = None
    data: Any = None


class RunStreamView(ResponseModel):
    """``GET /api/runs/{id}/stream``: the events after the cursor and the run's status."""

    run_id: str
    status: RunStatus
    events: list[JournalEventView]
    next: int = Field(description="the seq to pass as after on the next request")
    done: bool = Field(description="the run has ended: no event will follow")


def is_terminal(status: str) -> bool:
    """Whether a run with ``status`` has ended."""
    return status in _TERMINAL


def _entry_events(entry: TimelineEntry) -> list[dict[str, Any]]:
    base: dict[str, Any] = {"type": entry.type, "id": entry.id, "attempt": entry.attempt}
    if entry.kind:
        base["kind"] = entry.kind
    if entry.type == "action":
        # An action happens at one instant: one event, with who asked and why.
        data = {"by": entry.by, "reason": entry.reason, "detail": entry.detail or {}}
        return [{**base, "at": entry.started_at, "status": entry.outcome, "data": data, "phase": 1}]
    opening = "started" if entry.type == "step" else "pending"
    events = [{**base, "at": entry.started_at, "status": opening, "phase": 0}]
    if entry.outcome != opening:
        events.append(
            {
                **base,
                "at": entry.ended_at if entry.ended_at is not None else entry.started_at,
                "status": entry.outcome,
                "source": entry.source,
                "error": error_view(entry.error),
                "phase": 1,
            }
        )
    return events


def journal_feed(run: RunDetail) -> list[JournalEventView]:
    """Every event of ``run`` so far, numbered from 1 in time order."""
    raw: list[dict[str, Any]] = []
    for index, entry in enumerate(run.timeline):
        raw.extend(event | {"index": index} for event in _entry_events(entry))
    last = len(run.timeline)
    for stream_id, chunks in run.streams.items():
        raw.extend(
            {
                "type": "stream_chunk",
                "id": stream_id,
                "attempt": chunk.seq,
                "at": chunk.at,
                "status": "final" if chunk.final else "chunk",
                "data": chunk.chunk,
                "phase": 1,
                "index": last,
            }
            for chunk in chunks
        )
    if is_terminal(run.status):
        raw.append(
            {
                "type": "status",
                "at": run.completed_at or run.started_at,
                "status": run.status,
                "error": error_view(run.error),
                "phase": 2,
                "index": last + 1,
            }
        )
    # Same instant: timeline order (a step that ends before the next one starts comes first),
    # then an entry's opening before its outcome.
    raw.sort(key=lambda e: (e["at"], e["index"], e["phase"], e.get("attempt") or 0))
    return [
        JournalEventView.model_validate(
            {k: v for k, v in event.items() if k not in ("phase", "index")} | {"seq": seq}
        )
        for seq, event in enumerate(raw, start=1)
    ]


def change_keys(run: RunDetail) -> set[EventKey]:
    """The identities ``stream_run`` gives the events of ``run`` (to notice the next one)."""
    keys: set[EventKey] = {
        (entry.type, entry.id, entry.attempt, entry.outcome) for entry in run.timeline
    }
    for stream_id, chunks in run.streams.items():
        keys.update(
            ("stream_chunk", stream_id, c.seq, "final" if c.final else "chunk") for c in chunks
        )
    keys.add(("status", None, None, run.status))
    return keys


class RunStream:
    """Answers stream requests over an admin (``get_run`` and ``stream_run``).

    Args:
        admin: The ``relayflow.drivers.WorkflowAdmin``.
    """

    def __init__(self, admin: Any) -> None:
        self.admin = admin

    def read(
        self, run_id: str, after: int, wait_ms: int, seen_status: str | None = None
    ) -> RunStreamView:
        """The events after ``after``; waits up to ``wait_ms`` when there is none yet.

        A change of the run's status ends the wait too, even one that adds no event (a
        resumed run back to ``waiting``): a live view shows the status. ``seen_status`` is the
        status the caller shows; a run already in another one is answered at once, so that a
        change between the caller's last read and this request is not missed.

        Raises:
            RunNotFoundError: No such run.
        """
        run = self._get(run_id)
        feed = journal_feed(run)
        quiet = len(feed) <= after and seen_status in (None, run.status)
        if quiet and not is_terminal(run.status) and wait_ms > 0:
            run, feed = self._wait(run, after, wait_ms)
        return RunStreamView(
            run_id=run.id,
            status=run.status,
            events=feed[after:],
            next=max(after, len(feed)),
            done=is_terminal(run.status),
        )

    def _get(self, run_id: str) -> RunDetail:
        run: RunDetail | None = self.admin.get_run(run_id)
        if run is None:
            raise RunNotFoundError(f"no run with id {run_id!r}")
        return run

    def _wait(
        self, run: RunDetail, after: int, wait_ms: int
    ) -> tuple[RunDetail, list[JournalEventView]]:
        """Follow ``stream_run`` until the feed grows past ``after``, the run's status changes
        or time's up."""
        status = run.status
        known = change_keys(run)
        feed = journal_feed(run)
        changes: Iterable[Any] = self.admin.stream_run(
            run.id, follow=True, timeout_s=wait_ms / 1000
        )
        for event in changes:
            if event.key() in known:
                continue
            run = self._get(run.id)
            known |= change_keys(run)
            feed = journal_feed(run)
            if len(feed) > after or run.status != status:
                return run, feed
        run = self._get(run.id)
        return run, journal_feed(run)


def wait_budget_ms(requested: int, remaining_ms: Callable[[], int], margin_ms: int) -> int:
    """``requested`` capped by :data:`MAX_STREAM_WAIT_MS` and the Lambda time left."""
    return max(0, min(requested, MAX_STREAM_WAIT_MS, remaining_ms() - margin_ms))
