"""An alarm clock that arms a real one (Scheduler on moto, say) and an in-memory one, so that
virtual time fires what the real one only records."""

from __future__ import annotations

from relayflow.adapters.memory import InMemoryAlarmClock
from relayflow.ports import AlarmClock


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
