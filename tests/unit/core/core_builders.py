"""Builders shared by the core transition tests."""

from __future__ import annotations

from typing import Any

import pytest

from relayflow.core.record import RunRecord
from relayflow.core.settings import CoreSettings
from relayflow.core.transitions import SentInvocation, apply_response, begin_invocation
from relayflow.core.trigger import TriggerSpec, new_run

T0 = 1_000_000


@pytest.fixture
def settings() -> CoreSettings:
    return CoreSettings()


def fresh_run(run_id: str = "r1", **spec: Any) -> RunRecord:
    """A just-triggered run at T0."""
    return new_run(TriggerSpec(workflow_id="wf", input={"a": 1}, run_id=run_id, **spec), T0)


def respond(
    record: RunRecord, body: dict[str, Any], now: int = T0, status: int = 200
) -> tuple[RunRecord, SentInvocation, Any]:
    """Start an invocation and apply ``body`` as the host's answer."""
    start, sent = begin_invocation(record, now, CoreSettings())
    assert sent is not None
    result = apply_response(start.record, status, body, sent, now, CoreSettings())
    return result.record, sent, result.effects


def waiting(*waitpoints: dict[str, Any], journal: dict[str, Any] | None = None) -> dict[str, Any]:
    """A ``waiting`` response body."""
    return {"status": "waiting", "waitpoints": list(waitpoints), "journal": journal or {}}


def wp(wid: str, kind: str, timeout_ms: int | None = None, **meta: Any) -> dict[str, Any]:
    """A waitpoint in wire form."""
    raw: dict[str, Any] = {"clientWaitpointId": wid, "kind": kind, "meta": meta}
    if timeout_ms is not None:
        raw["timeoutMs"] = timeout_ms
    return raw
