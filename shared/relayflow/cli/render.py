"""Plain-text rendering of API answers for the ``relayflow`` command: tables, runs, timelines.

Field lookups are lenient (several spellings, missing keys allowed) so that the command keeps
printing something useful against deployments of other versions.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from relayflow.cli.render_costs import cost_lines

TERMINAL_STATUSES = frozenset(
    {"completed", "failed", "cancelled", "compensated", "compensation_failed"}
)


def pick(item: Mapping[str, Any], *keys: str, default: Any = None) -> Any:
    """The first present, non-None value among ``keys``."""
    for key in keys:
        value = item.get(key)
        if value is not None:
            return value
    return default


def to_ms(value: Any) -> int | None:
    """Epoch milliseconds from an int/float or an ISO 8601 string; None when unknown."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float):
        return int(value)
    if isinstance(value, str) and value:
        try:
            parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return None
        if parsed.tzinfo is None:
            parsed = parsed.replace(tzinfo=UTC)
        return int(parsed.timestamp() * 1000)
    return None


def format_time(value: Any) -> str:
    """A UTC wall-clock time (``2024-05-01 12:00:03``), or ``-``."""
    ms = to_ms(value)
    if ms is None:
        return "-"
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M:%S")


def format_duration(ms: int | float | None) -> str:
    """A short human duration: ``850ms``, ``4.2s``, ``3m05s``, ``2h10m``, ``3d4h``."""
    if ms is None:
        return "-"
    ms = max(0, int(ms))
    if ms < 1000:
        return f"{ms}ms"
    seconds = ms / 1000
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, sec = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes}m{sec:02d}s"
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return f"{hours}h{minutes:02d}m"
    days, hours = divmod(hours, 24)
    return f"{days}d{hours}h"


def compact_json(value: Any, limit: int = 0) -> str:
    """One-line JSON, cut to ``limit`` characters when ``limit`` > 0."""
    text = json.dumps(value, separators=(",", ":"), sort_keys=True, default=str)
    if limit and len(text) > limit:
        return text[: limit - 1] + "…"
    return text


def table(headers: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    """Left-aligned columns separated by two spaces, with a header line."""
    materialised = [list(headers), *[list(row) for row in rows]]
    widths = [max(len(row[i]) for row in materialised) for i in range(len(headers))]
    return "\n".join(
        "  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip()
        for row in materialised
    )


def run_duration_ms(run: Mapping[str, Any], now_ms: int | None = None) -> int | None:
    """The run's duration: as reported, else end (or ``now_ms`` if still going) minus start."""
    reported = pick(run, "durationMs", "duration_ms")
    if isinstance(reported, int | float):
        return int(reported)
    start = to_ms(pick(run, "startedAt", "started_at", "createdAt"))
    end = to_ms(pick(run, "completedAt", "completed_at", "endedAt"))
    if start is None:
        return None
    if end is None:
        if now_ms is None or pick(run, "status") in TERMINAL_STATUSES:
            return None
        end = now_ms
    return max(0, end - start)


def runs_table(runs: Sequence[Mapping[str, Any]]) -> str:
    """The ``runs list`` table."""
    rows = []
    for run in runs:
        tags = pick(run, "tags", default=[])
        rows.append(
            [
                str(pick(run, "id", "runId", default="?")),
                str(pick(run, "workflowId", "workflow_id", default="?")),
                str(pick(run, "status", default="?")),
                format_time(pick(run, "startedAt", "started_at")),
                format_duration(run_duration_ms(run)),
                ",".join(str(t) for t in tags) if isinstance(tags, list) else str(tags),
                version_label(run),
            ]
        )
    headers = ["RUN", "WORKFLOW", "STATUS", "STARTED (UTC)", "DURATION", "TAGS", "VERSION"]
    return table(headers, rows)


def version_label(run: Mapping[str, Any]) -> str:
    """``build-7`` (the build a run is on), ``build-7 (waiting)`` while the run waits for it,
    ``-`` before any code answered it."""
    version = run.get("codeVersion")
    build = version.get("build") if isinstance(version, dict) else None
    label = str(build) if build else "-"
    return f"{label} (waiting)" if run.get("versionWait") else label


def version_lines(run: Mapping[str, Any]) -> list[str]:
    """The ``runs get`` lines of the code a run is on and why it waits for it."""
    version = run.get("codeVersion")
    versioning = run.get("versioning")
    if not isinstance(version, dict) and versioning is None:
        return []
    where = "no code answered yet"
    if isinstance(version, dict):
        function = version.get("function")
        where = f"build {version.get('build', '?')}" + (
            f", function {function}" if function else ""
        )
    lines = [f"version   {where}" + (f" ({versioning})" if versioning else "")]
    wait = run.get("versionWait")
    if isinstance(wait, dict):
        lines.append(
            f"          waiting for it since {format_time(wait.get('since'))} "
            f"({wait.get('attempts', '?')} tries): {wait.get('reason', '')}"
        )
        lines.append(f"          move it: relayflow runs upgrade {pick(run, 'id', default='RUN')}")
    return lines


def timeline_entries(raw: Any) -> list[dict[str, Any]]:
    """The list of entries of a timeline answer (a list, or an object holding one)."""
    if isinstance(raw, list):
        return [e for e in raw if isinstance(e, dict)]
    if isinstance(raw, dict):
        for key in ("timeline", "entries", "items"):
            value = raw.get(key)
            if isinstance(value, list):
                return [e for e in value if isinstance(e, dict)]
    return []


def entry_label(entry: Mapping[str, Any]) -> str:
    """``step charge`` / ``wait sleep:0``: the kind and name of a timeline entry."""
    kind = str(pick(entry, "type", "kind", default="step")).lower()
    if kind == "action":
        return f"action {pick(entry, 'kind', default='?')}"
    name = pick(entry, "stepId", "waitpointId", "id", "name", default="?")
    return f"{kind} {name}"


def action_detail(entry: Mapping[str, Any]) -> str:
    """``by ops: stuck on the bank`` for an action entry; the empty string for others."""
    if entry.get("type") != "action":
        return ""
    reason = pick(entry, "reason")
    return f"by {pick(entry, 'by', default='?')}" + (f": {reason}" if reason else "")


def entry_outcome(entry: Mapping[str, Any]) -> str:
    """The outcome of a timeline entry (``ok``, ``err``, ``waiting``...)."""
    return str(pick(entry, "outcome", "status", "state", default="-"))


def entry_error(entry: Mapping[str, Any]) -> str:
    """``Type: message [CODE]`` of an entry's error (``CODE: message`` when the type is not
    known), or the empty string."""
    error = entry.get("error")
    if isinstance(error, dict):
        code = pick(error, "code", default="")
        message = pick(error, "message", default="")
        name = pick(error, "name", default="")
        if name:
            shown_code = f" [{code}]" if code and code != "UNKNOWN" else ""
            return f"{name}: {message}{shown_code}"
        return f"{code}: {message}" if code and message else str(code or message)
    if error:
        return str(error)
    return ""


#: Frames of a traceback ``runs get`` shows without ``--verbose``: where it failed.
STACK_TAIL_FRAMES = 3
_FRAME_START = '  File "'


def stack_lines(stack: str, *, verbose: bool = False) -> list[str]:
    """A recorded traceback as lines: all of it with ``verbose``, else its last frames."""
    lines = stack.rstrip("\n").splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith(_FRAME_START)]
    if verbose or len(starts) <= STACK_TAIL_FRAMES:
        return lines
    earlier = len(starts) - STACK_TAIL_FRAMES
    return [
        "Traceback (most recent call last):",
        f"  ... {earlier} earlier frame{'s' if earlier > 1 else ''} (--verbose shows all)",
        *lines[starts[earlier] :],
    ]


def error_stack(entry: Mapping[str, Any], *, verbose: bool = False) -> list[str]:
    """The traceback of an entry's error, indented, or no lines when it has none."""
    error = entry.get("error")
    stack = error.get("stack") if isinstance(error, dict) else None
    if not isinstance(stack, str) or not stack:
        return []
    return ["          " + line for line in stack_lines(stack, verbose=verbose)]


def overrun(entry: Mapping[str, Any], start: int | None) -> str:
    """``(its code ran on: returned after 4.0s)`` for a timed-out attempt whose code went on
    running, once the run recorded when it really ended; else the empty string."""
    ended = to_ms(pick(entry, "abandonedEndedAt"))
    if ended is None:
        return ""
    how = pick(entry, "abandonedOutcome", default="ended")
    after = f" after {format_duration(ended - start)}" if start is not None else ""
    return f"(its code ran on: {how}{after}, at {format_time(ended)})"


def timeline_table(entries: Sequence[Mapping[str, Any]]) -> str:
    """Steps and waits in order, with attempt, start, duration and outcome."""
    rows = []
    for entry in entries:
        start = to_ms(pick(entry, "startedAt", "start", "registeredAt", "at"))
        end = to_ms(pick(entry, "finishedAt", "end", "endedAt", "resolvedAt"))
        duration = pick(entry, "durationMs")
        if duration is None and start is not None and end is not None:
            duration = end - start
        attempt = pick(entry, "attempt")
        redrive = pick(entry, "redrive")
        parts = (
            action_detail(entry),
            entry_error(entry),
            overrun(entry, start),
            f"(before redrive {redrive})" if redrive is not None else "",
        )
        detail = " ".join(part for part in parts if part)
        if not detail:
            wake = to_ms(pick(entry, "wakeAt", "deadline"))
            if wake is not None and end is None:
                detail = f"until {format_time(wake)}"
        rows.append(
            [
                entry_label(entry),
                "" if attempt is None else str(attempt),
                format_time(start),
                format_duration(duration) if duration is not None else "-",
                entry_outcome(entry),
                detail,
            ]
        )
    return table(["ENTRY", "ATTEMPT", "START (UTC)", "DURATION", "OUTCOME", "DETAIL"], rows)


def describe_wait(wait: Mapping[str, Any], run_id: str = "RUN") -> str:
    """``token:t1 (token t1)``, ``sleep:0 until 12:00:03``: a pending wait in one phrase."""
    text = str(pick(wait, "id", default="?"))
    if wait.get("tokenId"):
        command = shlex.join(["relayflow", "token", "complete", run_id, str(wait["tokenId"])])
        text += f"  (complete with: {command})"
    elif wait.get("signalName"):
        text += f"  (signal {wait['signalName']})"
    elif wait.get("eventType"):
        text += f"  (event {wait['eventType']})"
    wake = to_ms(pick(wait, "wakeAt"))
    deadline = to_ms(pick(wait, "deadline"))
    if wake is not None:
        text += f" until {format_time(wake)}"
    elif deadline is not None:
        text += f" timeout {format_time(deadline)}"
    return text


def operations_lines(run: Mapping[str, Any]) -> list[str]:
    """What operators did to the run: its pause, redrives and rerun links."""
    lines = []
    pause = run.get("pause")
    if isinstance(pause, dict):
        reason = pick(pause, "reason")
        lines.append(
            f"paused    since {format_time(pick(pause, 'at'))} by {pick(pause, 'by', default='?')}"
            + (f": {reason}" if reason else "")
        )
    redrives = pick(run, "redriveCount", default=0)
    if redrives:
        lines.append(f"redriven  {redrives} time{'s' if redrives != 1 else ''}")
    origin = run.get("rerunOf")
    if isinstance(origin, dict):
        lines.append(
            f"rerun of  {pick(origin, 'runId', default='?')} "
            f"from step {pick(origin, 'fromStep', default='?')}"
        )
    reruns = run.get("reruns") or []
    if reruns:
        lines.append(f"reruns    {', '.join(str(r) for r in reruns)}")
    return lines


def run_details(
    run: Mapping[str, Any], entries: Sequence[Mapping[str, Any]], *, verbose: bool = False
) -> str:
    """The ``runs get`` view: header lines, output or error (with the end of its traceback,
    all of it and every failed attempt's with ``verbose``), then the timeline."""
    lines = [
        f"run       {pick(run, 'id', 'runId', default='?')}",
        f"workflow  {pick(run, 'workflowId', default='?')}",
        f"status    {pick(run, 'statusDetail', 'status', default='?')}",
        f"started   {format_time(pick(run, 'startedAt'))}",
    ]
    if pick(run, "completedAt") is not None:
        lines.append(f"ended     {format_time(pick(run, 'completedAt'))}")
    lines.append(f"duration  {format_duration(run_duration_ms(run))}")
    durability = pick(run, "durability")
    if durability is not None:
        lines.append(f"durable   {str(durability).replace('_', ' ')}")
    tags = pick(run, "tags", default=[])
    if tags:
        lines.append(f"tags      {', '.join(str(t) for t in tags)}")
    trace_id = pick(run, "traceId")
    if trace_id is not None:
        trace_url = pick(run, "traceUrl")
        lines.append(f"trace     {trace_id}" + (f"  {trace_url}" if trace_url else ""))
    lines.extend(version_lines(run))
    lines.extend(operations_lines(run))
    lines.extend(cost_lines(run))
    waits = [w for w in run.get("pendingWaitpoints") or [] if isinstance(w, dict)]
    for index, wait in enumerate(waits):
        label = "waits on" if index == 0 else ""
        run_id = str(pick(run, "id", "runId", default="RUN"))
        lines.append(f"{label:<9} {describe_wait(wait, run_id)}")
    children = run.get("children") or []
    if children:
        lines.append(f"children  {', '.join(str(c) for c in children)}")
    error = run.get("error")
    if error:
        lines.append(f"error     {entry_error({'error': error})}")
        lines.extend(error_stack({"error": error}, verbose=verbose))
    for report in run.get("compensations") or []:
        if isinstance(report, dict):
            lines.append(
                f"undone    {report.get('stepId', '?')}: {report.get('status', '?')}"
                + (f"  {entry_error(report)}" if report.get("error") else "")
            )
    if "output" in run and pick(run, "status") == "completed":
        lines.append(f"output    {compact_json(run.get('output'), 2000)}")
    lines.append("")
    if entries:
        lines.append(timeline_table(entries))
    else:
        lines.append("(no steps or waits yet)")
    if verbose:
        for entry in entries:
            stack = error_stack(entry, verbose=True)
            if stack:
                attempt = pick(entry, "attempt")
                which = f" (attempt {attempt})" if attempt is not None else ""
                lines += ["", f"{entry_label(entry)}{which}: {entry_error(entry)}", *stack]
    return "\n".join(lines)
