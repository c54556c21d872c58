"""Alarm clocks whose due alarms virtual time fires: the protocol the test environment needs,
EventBridge Scheduler on moto emulated from the schedules relayflow left there, and a clock
that mirrors a real one into an in-memory one (the benchmarks)."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from relayflow.adapters.aws.alarms import DueCallback, SchedulerAlarmClock
from relayflow.adapters.memory import InMemoryAlarmClock
from relayflow.ports import AlarmClock

if TYPE_CHECKING:
    from mypy_boto3_scheduler import EventBridgeSchedulerClient


class MirroredAlarmClock:
    """Arms and disarms every alarm on ``real`` and on ``virtual``.

    Args:
        real: The alarm clock under test (its calls are what is counted or inspected).
        virtual: Where the test's virtual clock finds due alarms (``next_alarm``, ``take``...).
    """

    def __init__(self, real: AlarmClock, virtual: InMemoryAlarmClock) -> None:
        self.real = real
        self.virtual = virtual

    def arm(self, run_id: str, wake_at_ms: int) -> None:
        """Arm on both clocks."""
        self.real.arm(run_id, wake_at_ms)
        self.virtual.arm(run_id, wake_at_ms)

    def disarm(self, run_id: str, wake_at_ms: int | None = None) -> None:
        """Disarm on both clocks."""
        self.real.disarm(run_id, wake_at_ms)
        self.virtual.disarm(run_id, wake_at_ms)

    def armed(self, run_id: str) -> int | None:
        """When the run's alarm fires in virtual time, or None."""
        return self.virtual.armed(run_id)

    def next_alarm(self) -> tuple[str, int] | None:
        """The earliest alarm in virtual time."""
        return self.virtual.next_alarm()

    def pending(self) -> list[tuple[str, int]]:
        """Every alarm in virtual time, earliest first."""
        return self.virtual.pending()

    def take(self, run_id: str, wake_at_ms: int) -> bool:
        """Consume the alarm as it fires in virtual time."""
        return self.virtual.take(run_id, wake_at_ms)


class FiredAlarms(Protocol):
    """An alarm clock whose due alarms a test environment fires as virtual time passes.

    :class:`~relayflow.adapters.memory.InMemoryAlarmClock` is one; :class:`EmulatedScheduler`
    is EventBridge Scheduler on moto seen the same way.
    """

    def arm(self, run_id: str, wake_at_ms: int) -> None: ...

    def disarm(self, run_id: str, wake_at_ms: int | None = None) -> None: ...

    def armed(self, run_id: str) -> int | None: ...

    def next_alarm(self) -> tuple[str, int] | None: ...

    def pending(self) -> list[tuple[str, int]]: ...

    def take(self, run_id: str, wake_at_ms: int) -> bool: ...


class EmulatedScheduler:
    """EventBridge Scheduler on moto, as relayflow leaves it, plus what Scheduler does itself.

    Arming and disarming are the real :class:`SchedulerAlarmClock` requests to moto; what is
    armed is read back from the schedules in moto (their ``{"runId", "wakeAt"}`` input), never
    from a copy kept aside. moto never fires a schedule, so :meth:`take` does what Scheduler
    does when one fires: it deletes the one-time schedule (``ActionAfterCompletion=DELETE``)
    and lets the caller deliver its input. A wake time that has already passed is handed to
    the clock's ``on_due`` instead of being armed; here that hand-off (an asynchronous drive
    invocation in a deployment) is queued and fires at its wake time like an alarm.

    Args:
        build: Builds the Scheduler alarm clock from the ``on_due`` hand-off to use.
        client_factory: The Scheduler client the emulation reads and deletes schedules with.
    """

    def __init__(
        self,
        build: Callable[[DueCallback], SchedulerAlarmClock],
        client_factory: Callable[[], EventBridgeSchedulerClient],
    ) -> None:
        self._handoffs: dict[str, int] = {}
        self._lock = threading.Lock()
        self.clock = build(self._hand_off)
        self._client_factory = client_factory

    def _hand_off(self, run_id: str, wake_at_ms: int) -> None:
        with self._lock:
            self._handoffs[run_id] = wake_at_ms

    def arm(self, run_id: str, wake_at_ms: int) -> None:
        """Arm the run's schedule in moto (or hand a past-due run off to be driven at once)."""
        with self._lock:
            self._handoffs.pop(run_id, None)
        self.clock.arm(run_id, wake_at_ms)

    def disarm(self, run_id: str, wake_at_ms: int | None = None) -> None:
        """Delete the run's schedule in moto (the one for ``wake_at_ms``, when given)."""
        self.clock.disarm(run_id, wake_at_ms)

    def schedules(self) -> dict[str, tuple[str, int, str]]:
        """Every schedule of the group in moto: name -> (run id, wake time, expression)."""
        client = self._client_factory()
        names: list[str] = []
        params: dict[str, Any] = {"GroupName": self.clock.group}
        while True:
            page = client.list_schedules(**params)
            names.extend(entry["Name"] for entry in page.get("Schedules", []))
            token = page.get("NextToken")
            if not token:
                break
            params["NextToken"] = token
        found: dict[str, tuple[str, int, str]] = {}
        for name in names:
            schedule = client.get_schedule(Name=name, GroupName=self.clock.group)
            payload = json.loads(schedule["Target"]["Input"])
            found[name] = (payload["runId"], int(payload["wakeAt"]), schedule["ScheduleExpression"])
        return found

    def handoffs(self) -> list[tuple[str, int]]:
        """Past-due runs handed off to be driven at once, not yet delivered."""
        with self._lock:
            return sorted(self._handoffs.items(), key=lambda item: (item[1], item[0]))

    def armed(self, run_id: str) -> int | None:
        """The latest wake time among the run's schedules in moto (or its pending hand-off).

        A run re-armed for another wake keeps its older schedule until that fires and finds
        nothing due, as on AWS.
        """
        with self._lock:
            if run_id in self._handoffs:
                return self._handoffs[run_id]
        wakes = [wake for run, wake, _ in self.schedules().values() if run == run_id]
        return max(wakes) if wakes else None

    def pending(self) -> list[tuple[str, int]]:
        """Every schedule in moto and every hand-off, earliest first."""
        alarms = set(self.handoffs())
        alarms.update((run_id, wake_at) for run_id, wake_at, _ in self.schedules().values())
        return sorted(alarms, key=lambda item: (item[1], item[0]))

    def next_alarm(self) -> tuple[str, int] | None:
        """The earliest schedule or hand-off."""
        pending = self.pending()
        return pending[0] if pending else None

    def take(self, run_id: str, wake_at_ms: int) -> bool:
        """Fire the run's alarm as Scheduler would: the one-time schedule is deleted."""
        with self._lock:
            if self._handoffs.get(run_id) == wake_at_ms:
                del self._handoffs[run_id]
                return True
        fired = [
            name
            for name, (run, wake, _) in self.schedules().items()
            if (run, wake) == (run_id, wake_at_ms)
        ]
        if not fired:
            return False
        self.clock.disarm(run_id, wake_at_ms)
        return True
