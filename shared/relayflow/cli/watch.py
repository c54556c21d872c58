"""Following a run until it ends: long polls of ``GET /api/runs/{id}/stream``, one line per
journal event, within a deadline."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TextIO

from relayflow.cli.client import ApiClient
from relayflow.cli.render import (
    TERMINAL_STATUSES,
    entry_error,
    format_duration,
    pick,
    timeline_entries,
)

#: One long poll waits at most this long (the API caps it below API Gateway's 30 s).
STREAM_WAIT_MS = 20_000


@dataclass
class WatchResult:
    """The last view of the run and whether it reached a terminal status in time."""

    run: dict[str, Any]
    entries: list[dict[str, Any]]
    finished: bool


def follow_run(
    client: ApiClient,
    run_id: str,
    *,
    timeout_s: float,
    interval_s: float,
    out: TextIO | None,
    initial: Mapping[str, Any] | None = None,
    monotonic: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> WatchResult:
    """Follow the run's journal until it ends or time runs out.

    Args:
        client: The API client.
        run_id: The run to follow.
        timeout_s: Give up after this many seconds (the result then has ``finished=False``).
        interval_s: Pause after a poll that brought nothing new (a server that could not wait).
        out: Where progress lines go; None follows silently.
        initial: A run view already in hand (from a trigger answer); a finished one is not
            followed.
        monotonic: The clock used for the deadline and elapsed times.
        sleep: Waits between polls that brought nothing.
    """
    started = monotonic()
    deadline = started + timeout_s
    run: dict[str, Any] = dict(initial) if initial is not None else client.get_run(run_id)
    status = str(pick(run, "status", default="?"))
    if out is not None:
        _line(out, monotonic() - started, f"run {status}")
    after = 0
    while status not in TERMINAL_STATUSES:
        left_ms = int((deadline - monotonic()) * 1000)
        if left_ms <= 0:
            return WatchResult(run, [], False)
        answer = client.stream(run_id, after=after, wait_ms=min(STREAM_WAIT_MS, left_ms))
        events = [e for e in answer.get("events") or [] if isinstance(e, dict)]
        if out is not None:
            for event in events:
                _line(out, monotonic() - started, _describe(event))
        after = int(answer.get("next", after))
        latest = str(answer.get("status", status))
        if latest != status and out is not None and not answer.get("done"):
            _line(out, monotonic() - started, f"run {latest}")
        status = latest
        if answer.get("done"):
            break
        if not events:
            sleep(max(0.0, min(interval_s, deadline - monotonic())))
    if status in TERMINAL_STATUSES and (initial is None or run.get("status") != status):
        run = client.get_run(run_id)
    return WatchResult(run, timeline_entries(client.timeline(run_id)), True)


def _describe(event: Mapping[str, Any]) -> str:
    kind = str(event.get("type", "?"))
    if kind == "status":
        return f"run {event.get('status')}"
    name = event.get("id", "?")
    if kind == "stream_chunk":
        return f"stream {name} {event.get('status')} {event.get('attempt')}"
    attempt = event.get("attempt")
    attempt_text = f" (attempt {attempt})" if kind == "step" and attempt is not None else ""
    error = entry_error(event)
    line = f"{kind} {name}{attempt_text}: {event.get('status')}"
    return line + (f"  {error}" if error else "")


def _line(out: TextIO, elapsed_s: float, text: str) -> None:
    stamp = ("+" + format_duration(int(elapsed_s * 1000))).rjust(8)
    out.write(f"{stamp}  {text}\n")
    out.flush()
