"""Which run the work in progress is for, and the usage counted for each run until a save
carries it.

The engine marks the work it does for a run (``working_on``); the adapters that talk to AWS
report what each request cost into a :class:`UsageMeter` under the run being worked on, and
the run store adds what is pending for a run to the record it saves (``take``), with what its
own writes cost. What follows a run's final save (its expiry stamps, its statistics) is
never recorded: it is not held either, until work on the run starts again (a redrive).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextvars import ContextVar

from relayflow.costs.usage import RunUsage

_WORKING_ON: ContextVar[str | None] = ContextVar("relayflow_working_on", default=None)
#: Runs whose usage a meter holds at most; the least recently counted is dropped beyond (a
#: process that stops working on a run before its next save holds it until then).
MAX_RUNS = 4096


def current_run() -> str | None:
    """The run the work in progress is for (None outside any)."""
    return _WORKING_ON.get()


class UsageMeter:
    """Usage counted per run and not saved yet, and the orchestrator time spent on each.

    Thread-safe. Time counts from when work on a run starts (``working_on``) until the save
    that takes it, then from that save on.

    Args:
        monotonic_ms: Elapsed-time source in milliseconds (``time.monotonic`` by default).
        max_runs: Runs held at most (the least recently counted dropped first).
    """

    def __init__(
        self, monotonic_ms: Callable[[], float] | None = None, *, max_runs: int = MAX_RUNS
    ) -> None:
        self._now = monotonic_ms or (lambda: time.monotonic() * 1000)
        self._lock = threading.Lock()
        self._max_runs = max_runs
        self._pending: OrderedDict[str, RunUsage] = OrderedDict()
        #: Runs whose final save was made while work on them is in progress: nothing more
        #: is counted for them until new work on them starts.
        self._ended: OrderedDict[str, None] = OrderedDict()
        #: When the time not yet taken started, per run being worked on (and how many
        #: nested scopes are open on it).
        self._busy_since: dict[str, tuple[float, int]] = {}

    def add(self, run_id: str, usage: RunUsage) -> None:
        """Count ``usage`` for ``run_id`` (carried by the run's next save)."""
        with self._lock:
            self._hold(run_id, usage)

    def _hold(self, run_id: str, usage: RunUsage) -> None:
        if run_id in self._ended:
            return
        held = self._pending.pop(run_id, None)
        self._pending[run_id] = usage if held is None else held.plus(usage)
        while len(self._pending) > self._max_runs:
            self._pending.popitem(last=False)

    def add_current(self, usage: RunUsage) -> None:
        """Count ``usage`` for the run being worked on (nothing outside any)."""
        run_id = current_run()
        if run_id is not None:
            self.add(run_id, usage)

    def take(self, run_id: str) -> RunUsage:
        """The usage pending for ``run_id`` with the time spent since the last take; resets."""
        with self._lock:
            pending = self._pending.pop(run_id, RunUsage())
            busy = self._busy_since.get(run_id)
            if busy is not None:
                now = self._now()
                elapsed = int(now - busy[0])
                self._busy_since[run_id] = (busy[0] + elapsed, busy[1])
                pending = pending.plus(RunUsage(orchestrator_ms=elapsed))
            return pending

    def pending(self, run_id: str) -> RunUsage:
        """What the next save of ``run_id`` would carry now, time aside (nothing is reset)."""
        with self._lock:
            return self._pending.get(run_id, RunUsage())

    def drop(self, run_id: str) -> RunUsage:
        """Forget what is pending for a run no save will carry any more (and the time of
        the work on it in progress), and count nothing more for it until new work on it
        starts; returns what was pending."""
        with self._lock:
            self._busy_since.pop(run_id, None)
            self._ended[run_id] = None
            while len(self._ended) > self._max_runs:
                self._ended.popitem(last=False)
            return self._pending.pop(run_id, RunUsage())

    @contextlib.contextmanager
    def working_on(self, run_id: str, *, invocation: bool = False) -> Iterator[None]:
        """Attribute the work done inside to ``run_id``.

        Args:
            invocation: The work is an invocation of the orchestrator's function of its own
                (an API request or a drive event); one nested in work on another run is not.
        """
        if current_run() != run_id:
            with self._lock:
                self._ended.pop(run_id, None)
        if invocation and current_run() is None:
            self.add(run_id, RunUsage(drive_invocations=1))
        with self._lock:
            since, depth = self._busy_since.get(run_id, (self._now(), 0))
            self._busy_since[run_id] = (since, depth + 1)
        token = _WORKING_ON.set(run_id)
        try:
            yield
        finally:
            _WORKING_ON.reset(token)
            self._stop_working(run_id)

    def _stop_working(self, run_id: str) -> None:
        with self._lock:
            busy = self._busy_since.get(run_id)
            if busy is None:
                return  # dropped meanwhile: the run's time is no longer counted
            since, depth = busy
            if depth > 1:
                self._busy_since[run_id] = (since, depth - 1)
            else:
                del self._busy_since[run_id]
                self._hold(run_id, RunUsage(orchestrator_ms=int(self._now() - since)))
