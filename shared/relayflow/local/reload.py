"""``relayflow dev --reload``: run the stack in a child process, restart it when code changes.

The stack saves its state when it stops and restores it when it starts, so a restart keeps
every run, alarm and manifest: waiting runs carry on, a pinned workflow's on the code it
started with (see :mod:`relayflow.local.code_archive`), an upgrade workflow's on the new code.
Only the first start honours ``--fresh``.
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib.util
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import TextIO

import watchfiles

from relayflow.cli.app_loader import put_working_directory_on_path

__all__ = ["WatchedCode", "supervise", "watched_code"]

_STOP_TIMEOUT_S = 30.0
# How long the watcher waits for more changes before restarting once for all of them.
_DEBOUNCE_MS = 300
# How often the supervisor looks up from the watcher (a stop request, a stack that exited).
_WAKE_MS = 500


@dataclass(frozen=True)
class WatchedCode:
    """The code whose changes restart the stack: the app's folders, and whether to look inside."""

    folders: tuple[Path, ...]
    recursive: bool

    def describe(self) -> str:
        """The folders, as the supervisor's first line shows them."""
        return ", ".join(str(f) for f in self.folders)


def watched_code(app: str | None) -> WatchedCode | None:
    """The code of the ``--app`` module, found as the stack finds it (the current directory too).

    A package is watched whole; a single module through its folder's other modules too (the
    ones next to it that it imports). ``None`` when there is no app, or it cannot be found.
    """
    if not app:
        return None
    put_working_directory_on_path()
    try:
        spec = importlib.util.find_spec(app.partition(".")[0])
    except (ImportError, ValueError):
        spec = None
    if spec is None:
        return None
    if spec.submodule_search_locations:
        folders = tuple(Path(p).resolve() for p in spec.submodule_search_locations)
        return WatchedCode(folders=folders, recursive=True)
    if spec.origin is None or not Path(spec.origin).is_file():
        return None
    return WatchedCode(folders=(Path(spec.origin).resolve().parent,), recursive=False)


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


def supervise(argv: list[str], *, app: str | None, out: TextIO, err: TextIO) -> int:
    """Run ``relayflow dev`` (``argv`` without ``--reload``) and restart it on code changes.

    Returns when SIGINT or SIGTERM arrives, with the exit status of the last stack.
    """
    code = watched_code(app)
    stopped = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stopped.set()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    missing = f"app module {app} not found" if app else "no --app module"
    shown = code.describe() if code else f"nothing ({missing})"
    out.write(f"relayflow dev: reloading on changes to {shown}\n")
    out.flush()
    child: subprocess.Popen[bytes] | None = None
    status = 0
    try:
        child = _start_child(argv, first=True)
        reported_exit = False
        for changes in _changes(code, stopped):
            if child.poll() is not None and not reported_exit:
                status = child.returncode
                err.write(
                    f"relayflow dev: the stack exited with {status}; "
                    "it starts again at the next change\n"
                )
                err.flush()
                reported_exit = True
            if not changes:
                continue
            changed = sorted(path for _, path in changes)[0]
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


def _changes(
    code: WatchedCode | None, stopped: threading.Event
) -> Iterator[set[tuple[watchfiles.Change, str]]]:
    """Batches of changed Python files; an empty batch every wake-up, until ``stopped``."""
    if code is None:
        while not stopped.wait(_WAKE_MS / 1000):
            yield set()
        return
    yield from watchfiles.watch(
        *code.folders,
        watch_filter=watchfiles.PythonFilter(),
        recursive=code.recursive,
        debounce=_DEBOUNCE_MS,
        rust_timeout=_WAKE_MS,
        yield_on_timeout=True,
        stop_event=stopped,
        raise_interrupt=False,
    )
