"""Turns the admin's run details and driver results into the API's response models."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

from relayflow.api.models import (
    DeliveryView,
    IngestMatchView,
    IngestResultView,
    InjectionView,
    PendingWaitpointView,
    RunErrorView,
    RunSummaryView,
    RunView,
    TimelineEntryView,
    TimelineView,
)
from relayflow.config import current_settings
from relayflow.core.record import Redrive
from relayflow.core.views import RunDetail, RunSummary, TimelinePage
from relayflow.drivers import DeliveryResult
from relayflow.tracing.ids import trace_url

#: Kinds of the positional wait ids (``<prefix>:...``) the SDK registers.
_KIND_OF_PREFIX = {
    "sleep": "DATETIME",
    "retry": "DATETIME",
    "checkpoint": "DATETIME",
    "condition": "DATETIME",
    "event": "EVENT",
    "signal": "SIGNAL",
    "token": "MANUAL",
    "invoke": "RUN",
}


def _dump(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json", by_alias=True, exclude_none=True)
    return value


def error_view(error: Any) -> RunErrorView | None:
    """A serialised error as the API shows it, its type in ``name`` and traceback in ``stack``."""
    if error is None:
        return None
    data = _dump(error)
    if not isinstance(data, Mapping):
        return RunErrorView(message=str(data))
    return RunErrorView.model_validate(data)


def pending_view(wait_id: str, detail: RunDetail) -> PendingWaitpointView:
    """A pending wait: its kind and key read from its id, its start from the timeline."""
    prefix, _, rest = wait_id.partition(":")
    kind = _KIND_OF_PREFIX.get(prefix)
    registered_at = None
    token_id = rest if prefix == "token" else None
    for entry in detail.timeline:
        if entry.type == "wait" and entry.id == wait_id:
            kind = entry.kind or kind
            registered_at = entry.started_at
            token_id = entry.token_id or token_id
    key = rest.rpartition(":")[0] if prefix in ("event", "signal") else rest
    return PendingWaitpointView(
        id=wait_id,
        kind=kind,
        registered_at=registered_at,
        event_type=key if prefix == "event" else None,
        signal_name=key if prefix == "signal" else None,
        token_id=token_id,
    )


def _run_fields(detail: RunDetail) -> dict[str, Any]:
    terminal = detail.completed_at is not None
    return {
        "id": detail.id,
        "workflow_id": detail.workflow_id,
        "workflow_version": detail.workflow_version,
        "status": detail.status,
        "status_detail": detail.status_detail,
        "environment": detail.environment,
        "input": detail.input,
        "output": detail.output,
        "error": error_view(detail.error),
        "pending_waitpoints": []
        if terminal
        else [pending_view(wid, detail) for wid in detail.pending_waits],
        "tags": list(detail.tags),
        "metadata": dict(detail.metadata),
        "idempotency_key": detail.idempotency_key,
        "parent_run_id": detail.parent_run_id,
        "children": list(detail.children),
        "triggered_by": _dump(detail.triggered_by),
        "compensations": [_dump(c) for c in detail.compensations],
        "compensation_skipped": _dump(detail.compensation_skipped),
        "started_at": detail.started_at,
        "completed_at": detail.completed_at,
        "duration_ms": detail.duration_ms,
        "durability": detail.durability,
        "values_unavailable": [_dump(item) for item in detail.values_unavailable],
        "actions": [_dump(action) for action in detail.actions],
        "pause": _dump(detail.pause),
        "redrive_count": detail.redrive_count,
        "redrives": [redrive_view(redrive) for redrive in detail.redrives],
        "rerun_of": _dump(detail.rerun_of),
        "reruns": list(detail.reruns),
        **_version_fields(detail),
        "trace_id": detail.trace_id,
        "trace_url": trace_url(current_settings().trace_viewer_url, detail.trace_id),
        "usage": detail.usage,
        "cost": detail.cost,
    }


def _version_fields(item: RunSummary) -> dict[str, Any]:
    return {
        "code_version": _dump(item.code_version),
        "versioning": item.versioning,
        "version_wait": _dump(item.version_wait),
    }


def redrive_view(redrive: Redrive) -> dict[str, Any]:
    """A redrive as the API shows it: the removed steps as their attempts."""
    steps = {
        key: [_dump(a) for a in entry.attempts]
        or [{"attempt": entry.attempt, "status": entry.status, "startedAt": entry.started_at}]
        for key, entry in redrive.steps.items()
    }
    return {
        "at": redrive.at,
        "action_id": redrive.action_id,
        "error": _dump(redrive.error),
        "steps": steps,
        "compensations": {k: _dump(v) for k, v in redrive.compensations.items()},
    }


def run_view(detail: RunDetail) -> RunView:
    """The full view of one run."""
    return RunView.model_validate(_run_fields(detail))


def injection_view(delivery: DeliveryResult) -> InjectionView:
    """The run after a delivery, with the delivery's outcome."""
    return InjectionView.model_validate(
        {
            **_run_fields(delivery.run),
            "delivery": DeliveryView(status=delivery.status, waitpoint_id=delivery.waitpoint_id),
        }
    )


def run_summary(item: RunSummary) -> RunSummaryView:
    """A run in a listing."""
    return RunSummaryView.model_validate(
        {
            "id": item.id,
            "workflow_id": item.workflow_id,
            "status": item.status,
            "environment": item.environment,
            "tags": list(item.tags),
            "started_at": item.started_at,
            "completed_at": item.completed_at,
            "values_unavailable": [_dump(v) for v in item.values_unavailable],
            "pause": _dump(item.pause),
            "redrive_count": item.redrive_count,
            "parent_run_id": item.parent_run_id,
            "rerun_of": _dump(item.rerun_of),
            **_version_fields(item),
        }
    )


def timeline_view(page: TimelinePage) -> TimelineView:
    """A page of the run's timeline: one entry per step attempt and per wait, in start order."""
    entries = [
        TimelineEntryView.model_validate(
            {
                "type": entry.type,
                "id": entry.id,
                "attempt": entry.attempt,
                "kind": entry.kind,
                "started_at": entry.started_at,
                "ended_at": entry.ended_at,
                "outcome": entry.outcome,
                "source": entry.source,
                "error": error_view(entry.error),
                "name": entry.name,
                "token_id": entry.token_id,
                "value": entry.value,
                "value_size": entry.value_size,
                "input": entry.input,
                "value_truncated": entry.value_truncated,
                "value_unavailable": entry.value_unavailable,
                "abandoned_ended_at": entry.abandoned_ended_at,
                "abandoned_outcome": entry.abandoned_outcome,
                "top_level": entry.top_level,
                "redrive": entry.redrive,
                "by": entry.by,
                "reason": entry.reason,
                "detail": entry.detail,
            }
        )
        for entry in page.entries
    ]
    return TimelineView.model_validate(
        {
            "run_id": page.run_id,
            "status": page.status,
            "status_detail": page.status_detail,
            "entries": entries,
            "next_cursor": page.next_cursor,
            "values_unavailable": [_dump(item) for item in page.values_unavailable],
        }
    )


def ingest_view(result: Any) -> IngestResultView:
    """The ingest outcome (a mapping) as the API shows it."""
    data = _dump(result)
    if not isinstance(data, Mapping):
        raise TypeError(f"ingest returned {type(result).__name__}, expected a mapping")
    matches = [IngestMatchView.model_validate(_dump(m)) for m in data.get("matches") or []]
    return IngestResultView(
        ok=bool(data.get("ok")),
        event_id=data.get("eventId"),
        matches=matches,
        reason=data.get("reason"),
        message=data.get("message"),
    )
