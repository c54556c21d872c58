"""``relayflow dev --reload``: run the stack in a child process, restart it when code changes.

The stack saves its state when it stops and restores it when it starts, so a restart keeps
every run, alarm and manifest: waiting runs carry on with the new code. Only the first start
honours ``--fresh``.
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib.util
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path
from types import FrameType
from typing import TextIO

__all__ = ["changed_file", "supervise", "watched_files"]

POLL_INTERVAL_S = 1.0
_STOP_TIMEOUT_S = 30.0
_SKIPPED_DIRS = frozenset({"__pycache__", ".git", ".venv", ".relayflow", "node_modules"})


def _app_roots(app: str | None) -> list[Path]:
    if not app:
        return []
    try:
        spec = importlib.util.find_spec(app.partition(".")[0])
    except (ImportError, ValueError):
        spec = None
    if spec is None or spec.origin is None:
        return []
    origin = Path(spec.origin)
    # A package: its whole folder; a single module: that file.
    return [origin.parent] if origin.name == "__init__.py" else [origin]


def watched_files(roots: Iterable[Path]) -> Iterator[Path]:
    """The Python sources under ``roots`` (files, or folders searched recursively)."""
    for root in roots:
        if root.is_file():
            yield root
            continue
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames[:] = [d for d in dirnames if d not in _SKIPPED_DIRS]
            for name in filenames:
                if name.endswith(".py"):
                    yield Path(dirpath) / name


def _stamps(roots: Iterable[Path]) -> dict[Path, int]:
    stamps: dict[Path, int] = {}
    for path in watched_files(roots):
        try:
            stamps[path] = path.stat().st_mtime_ns
        except FileNotFoundError:
            continue  # removed while we looked
    return stamps


def changed_file(before: dict[Path, int], after: dict[Path, int]) -> Path | None:
    """A file added, removed or modified between two scans, if any."""
    for path in sorted(set(before) | set(after)):
        if before.get(path) != after.get(path):
            return path
    return None


_PR_SET_PDEATHSIG = 1


def _end_with_parent() -> None:
    # Linux: the stack gets SIGINT (and saves its state) if the supervisor dies, kill -9
    # included, instead of running on without it. Elsewhere the call is unavailable.
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGINT)


def _start_child(argv: list[str], *, first: bool) -> subprocess.Popen[bytes]:
    return subprocess.Popen(_child_argv(argv, first=first), preexec_fn=_end_with_parent)


def _child_argv(argv: list[str], *, first: bool) -> list[str]:
    kept = [a for a in argv if a != "--reload" and (first or a != "--fresh")]
    return [sys.executable, "-m", "relayflow.cli", *kept]


def _stop_child(child: subprocess.Popen[bytes]) -> int:
    if child.poll() is None:
        child.send_signal(signal.SIGINT)  # the stack saves its state on the way out
        try:
            return child.wait(timeout=_STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            child.kill()
    return child.wait()


def supervise(
    argv: list[str],
    *,
    app: str | None,
    out: TextIO,
    err: TextIO,
    poll_interval_s: float = POLL_INTERVAL_S,
) -> int:
    """Run ``relayflow dev`` (``argv`` without ``--reload``) and restart it on code changes.

    Returns when SIGINT or SIGTERM arrives, with the exit status of the last stack.
    """
    roots = _app_roots(app)
    stopped = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stopped.set()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    shown = ", ".join(str(r) for r in roots) or "nothing (no --app module found)"
    out.write(f"relayflow dev: reloading on changes to {shown}\n")
    out.flush()
    child: subprocess.Popen[bytes] | None = None
    status = 0
    try:
        stamps = _stamps(roots)
        child = _start_child(argv, first=True)
        reported_exit = False
        while not stopped.wait(poll_interval_s):
            if child.poll() is not None and not reported_exit:
                status = child.returncode
                err.write(
                    f"relayflow dev: the stack exited with {status}; "
                    "it starts again at the next change\n"
                )
                err.flush()
                reported_exit = True
            current = _stamps(roots)
            changed = changed_file(stamps, current)
            if changed is None:
                continue
            stamps = current
            out.write(
                f"relayflow dev: {changed} changed; restarting the hosted workflows "
                "(runs carry on)\n"
            )
            out.flush()
            _stop_child(child)
            child = _start_child(argv, first=False)
            reported_exit = False
        return _stop_child(child) if child.poll() is None else status
    finally:
        if child is not None and child.poll() is None:
            _stop_child(child)
        for sig, handler in previous.items():
            signal.signal(sig, handler)
