"""Totals of the reliability tests (faults injected, races run, bad inputs tried, runs lost),
printed once at the end of a session that ran them."""

from __future__ import annotations

import os
import threading
from collections import Counter
from typing import Any

#: ``RELAYFLOW_FAULT_SWEEP=full`` runs every crash point and more generated inputs.
FULL_SWEEP = os.environ.get("RELAYFLOW_FAULT_SWEEP", "").strip().lower() == "full"

#: The figures printed in the summary, in this order, with their labels.
LABELS: dict[str, str] = {
    "crash_points": "crash points swept (process killed at an AWS call)",
    "crash_points_refused": "  of which refused (killed before the call was sent)",
    "crash_points_applied": "  of which applied (killed after the service applied it)",
    "crash_recoveries": "runs recovered after a crash",
    "transient_faults": "transient AWS/host errors injected",
    "transient_faults_refused": "  of which refused (never applied)",
    "transient_faults_applied": "  of which applied (applied, then the answer lost)",
    "outage_points": "storage calls failed past botocore's retries (one per run)",
    "outage_points_refused": "  of which refused (never applied)",
    "outage_points_applied": "  of which applied (applied, then the answer lost)",
    "outage_points_dynamodb": "  of which DynamoDB calls",
    "outage_points_s3": "  of which S3 calls",
    "outage_points_scheduler": "  of which Scheduler calls",
    "outage_points_sqs": "  of which SQS calls",
    "storage_faults": "storage errors injected into per-step runs (every attempt of a call)",
    "storage_faults_refused": "  of which refused (never applied)",
    "storage_faults_applied": "  of which applied (applied, then the answer lost)",
    "runs_driven_again": "runs driven again after a transient error (runs.driven_again)",
    "storage_refusals": "requests refused for good (permission, size) ending a run clearly",
    "runs_failed_transient": "runs failed by a transient storage error (must be 0)",
    "races": "concurrent races run",
    "race_operations": "concurrent operations in those races",
    "alarms_misdelivered": "duplicate, early and late alarms delivered",
    "generated_requests": "generated API requests (schemathesis)",
    "bad_inputs": "hand-written hostile inputs tried",
    "auth_refusals": "unauthenticated or forged requests refused",
    "garbage_step_answers": "invalid step-host answers handled",
    "runs_checked": "runs checked for their final state",
    "server_errors": "5xx answers to client input (must be 0)",
    "schema_violations": "answers breaking the OpenAPI document (must be 0)",
    "runs_lost": "runs lost or ending differently (must be 0)",
    "runs_lost_refused": "  of which after a refused call (must be 0)",
    "runs_lost_applied": "  of which after an applied call (must be 0)",
    "double_executions": "step attempts run beyond the allowed window (must be 0)",
}

_lock = threading.Lock()
_counts: Counter[str] = Counter()


def add(name: str, amount: int = 1) -> None:
    """Add ``amount`` to the figure ``name`` (one of :data:`LABELS`)."""
    if name not in LABELS:
        raise KeyError(f"unknown reliability figure {name!r}")
    with _lock:
        _counts[name] += amount


def crash_point(mode: str) -> None:
    """Count one crash point swept in ``mode``."""
    add("crash_points")
    add(f"crash_points_{mode}")


def run_lost(mode: str) -> None:
    """Count one run lost (or ending differently) after a fault in ``mode``."""
    add("runs_lost")
    add(f"runs_lost_{mode}")


def snapshot() -> dict[str, int]:
    """Every figure, zero included."""
    with _lock:
        return {name: _counts.get(name, 0) for name in LABELS}


def used() -> bool:
    """True when any reliability test recorded something in this process."""
    with _lock:
        return any(_counts.values())


def summary_lines() -> list[str]:
    """The summary printed at the end of the session."""
    figures = snapshot()
    width = max(len(label) for label in LABELS.values())
    mode = "full sweep" if FULL_SWEEP else "default sweep (RELAYFLOW_FAULT_SWEEP=full for all)"
    lines = [f"relayflow reliability totals - {mode}"]
    lines.extend(f"  {LABELS[name]:<{width}}  {value:>7}" for name, value in figures.items())
    return lines


def swept(calls: list[str], mode: str, services: tuple[str, ...] | None = None) -> list[int]:
    """The 1-based call numbers a sweep kills or fails (of ``services`` when given): all of
    them with the full sweep, else every third (the two modes on different residues)."""
    points = [
        n for n, call in enumerate(calls, 1) if services is None or call.split(":")[0] in services
    ]
    if FULL_SWEEP:
        return points
    return points[(0 if mode == "refused" else 1) :: 3]


def differences(outcome: Any, expected: Any) -> list[str]:
    """How a scenario's outcome (a dataclass) differs from the fault-free one, by field."""
    return [
        f"{name}: {getattr(outcome, name)!r}, expected {getattr(expected, name)!r}"
        for name in expected.__dataclass_fields__
        if getattr(outcome, name) != getattr(expected, name)
    ]
