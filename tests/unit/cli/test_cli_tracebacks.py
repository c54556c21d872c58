"""``relayflow runs get`` shows a failed run's exception type and the end of its traceback;
``--verbose`` shows every recorded frame and each failed attempt's traceback."""

from __future__ import annotations

import io
from typing import Any

from cli_fake_api import FakeApi

from relayflow.cli import main
from relayflow.sdk.tracebacks import format_user_traceback


def level_1(order: dict[str, Any]) -> Any:
    return level_2(order)


def level_2(order: dict[str, Any]) -> Any:
    return level_3(order)


def level_3(order: dict[str, Any]) -> Any:
    return level_4(order)


def level_4(order: dict[str, Any]) -> Any:
    return order["id"]


def recorded_stack() -> str:
    """The traceback a step host records for a step raising ``KeyError('id')`` 4 calls deep."""
    try:
        level_1({})
    except KeyError as exc:
        stack = format_user_traceback(exc)
    assert stack is not None
    return stack


STACK = recorded_stack()
ERROR = {"category": "USER_ERROR", "code": "UNKNOWN", "message": "'id'", "name": "KeyError"}
RUN = {
    "id": "run_1",
    "workflowId": "orders.fulfil",
    "status": "failed",
    "startedAt": 1_700_000_000_000,
    "completedAt": 1_700_000_001_000,
    "tags": [],
    "error": {**ERROR, "stack": STACK},
}
RETRY_STACK = 'Traceback (most recent call last):\n  File "/app/steps.py", line 3, in charge\n'
TIMELINE = {
    "entries": [
        {
            "type": "step",
            "id": "charge",
            "attempt": 1,
            "startedAt": 1_700_000_000_010,
            "endedAt": 1_700_000_000_050,
            "outcome": "err",
            "error": {
                "code": "UNKNOWN",
                "message": "gateway refused",
                "name": "ConnectionError",
                "stack": RETRY_STACK + "    gateway()\nConnectionError: gateway refused\n",
            },
        },
        {
            "type": "step",
            "id": "charge",
            "attempt": 2,
            "startedAt": 1_700_000_000_060,
            "endedAt": 1_700_000_000_090,
            "outcome": "ok",
        },
        {
            "type": "step",
            "id": "load",
            "attempt": 1,
            "startedAt": 1_700_000_000_100,
            "endedAt": 1_700_000_000_120,
            "outcome": "err",
            "error": {**ERROR, "stack": STACK},
        },
    ]
}


def runs_get(api: FakeApi, *flags: str) -> str:
    api.on("GET", "/api/runs/run_1", (200, RUN))
    api.on("GET", "/api/runs/run_1/timeline", (200, TIMELINE))
    out, err = io.StringIO(), io.StringIO()
    assert main(["--url", api.url, "runs", "get", "run_1", *flags], stdout=out, stderr=err) == 0
    return out.getvalue()


def test_runs_get_shows_the_type_and_the_last_frames(fake_api: FakeApi) -> None:
    out = runs_get(fake_api)

    assert "error     KeyError: 'id'\n" in out
    # recorded_stack and level_1 are left out: 5 frames were recorded
    assert "... 2 earlier frames (--verbose shows all)" in out
    for name in ("level_2", "level_3", "level_4"):
        assert f"in {name}\n" in out
    assert "in level_1\n" not in out
    assert "          KeyError: 'id'" in out
    assert "ConnectionError: gateway refused" in out  # the timeline's row of attempt 1
    assert "charge (attempt 1)" not in out


def test_runs_get_verbose_shows_every_frame_and_each_failed_attempt(fake_api: FakeApi) -> None:
    out = runs_get(fake_api, "--verbose")

    assert "earlier frames" not in out
    for name in ("recorded_stack", "level_1", "level_2", "level_3", "level_4"):
        assert f"in {name}\n" in out
    assert "step charge (attempt 1): ConnectionError: gateway refused" in out
    assert '          File "/app/steps.py", line 3, in charge' in out
    assert "step load (attempt 1): KeyError: 'id'" in out
