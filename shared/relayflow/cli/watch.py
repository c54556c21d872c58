"""Following a run until it ends: polling with a deadline and a line per visible change."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TextIO

from relayflow.cli.client import ApiClient
from relayflow.cli.render import (
    TERMINAL_STATUSES,
    entry_error,
    entry_label,
    entry_outcome,
    format_duration,
    pick,
    timeline_entries,
)


@dataclass
class WatchResult:
    """The last view of the run and whether it reached a terminal status in time."""

    run: dict[str, Any]
    entries: list[dict[str, Any]]
    finished: bool


@dataclass
class _Progress:
    seen: dict[str, str] = field(default_factory=dict)
    status: str | None = None


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
    """Poll the run (and its timeline when ``out`` is set) until it ends or time runs out.

    Args:
        client: The API client.
        run_id: The run to follow.
        timeout_s: Give up after this many seconds (the result then has ``finished=False``).
        interval_s: Pause between polls.
        out: Where progress lines go; None follows silently.
        initial: A run view already in hand (from a trigger answer), shown first.
        monotonic: The clock used for the deadline and elapsed times.
        sleep: Waits between polls.
    """
    started = monotonic()
    deadline = started + timeout_s
    progress = _Progress()
    run: dict[str, Any] = dict(initial) if initial is not None else client.get_run(run_id)
    entries: list[dict[str, Any]] = []
    while True:
        status = str(pick(run, "status", default="?"))
        if out is not None:
            entries = timeline_entries(client.timeline(run_id))
            _report(progress, status, entries, monotonic() - started, out)
        if status in TERMINAL_STATUSES:
            if out is None:
                entries = timeline_entries(client.timeline(run_id))
            return WatchResult(run, entries, True)
        if monotonic() >= deadline:
            return WatchResult(run, entries, False)
        sleep(max(0.0, min(interval_s, deadline - monotonic())))
        run = client.get_run(run_id)


def _report(
    progress: _Progress,
    status: str,
    entries: list[dict[str, Any]],
    elapsed_s: float,
    out: TextIO,
) -> None:
    stamp = ("+" + format_duration(int(elapsed_s * 1000))).rjust(8)
    for entry in entries:
        label = entry_label(entry)
        attempt = pick(entry, "attempt")
        key = f"{label}#{attempt}" if attempt is not None else label
        outcome = entry_outcome(entry)
        if progress.seen.get(key) == outcome:
            continue
        progress.seen[key] = outcome
        extra = entry_error(entry)
        attempt_text = f" (attempt {attempt})" if attempt is not None else ""
        line = f"{stamp}  {label}{attempt_text}: {outcome}"
        out.write(line + (f"  {extra}" if extra else "") + "\n")
    if status != progress.status:
        progress.status = status
        out.write(f"{stamp}  run {status}\n")
    out.flush()
