"""Run alarms with second precision: wake-ups less than 15 minutes ahead become SQS messages
with a per-message delay (up to 900 s) that the drive function consumes; later ones go to
EventBridge Scheduler (one-minute precision) set a few minutes early, and that early firing
finds nothing due and re-arms, which hands the remaining seconds to the queue.

Both paths carry ``{"runId", "wakeAt"}``; the engine ignores early and duplicate alarms, so
whichever fires first wins and the other finds nothing due.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING

from relayflow.adapters.aws.errors import reraise
from relayflow.errors import ValidationError
from relayflow.ports import AlarmClock, Clock

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient

#: SQS's largest per-message delay.
MAX_DELAY_S = 900
#: How early a long wait's Scheduler alarm is set (Scheduler may fire up to 60 s late).
DEFAULT_LEAD_MS = 180_000


def delay_seconds(wake_at_ms: int, now_ms: int) -> int:
    """Whole seconds from now to the wake time, rounded up (never early), 0-900."""
    return max(0, min(MAX_DELAY_S, -(-(wake_at_ms - now_ms) // 1000)))


class SqsDelayAlarmClock:
    """Alarms as delayed SQS messages; disarming is a no-op (a stale message finds nothing
    due). Only for wake-ups at most 900 s ahead."""

    def __init__(
        self, queue_url: str, *, client_factory: Callable[[], SQSClient], clock: Clock
    ) -> None:
        self.queue_url = queue_url
        self._client_factory = client_factory
        self._clock = clock

    def arm(self, run_id: str, wake_at_ms: int) -> None:
        """Send ``{"runId", "wakeAt"}`` delayed until the wake time."""
        delay = delay_seconds(wake_at_ms, self._clock.now_ms())
        if wake_at_ms - self._clock.now_ms() > MAX_DELAY_S * 1000:
            raise ValidationError(f"a wake-up {wake_at_ms} is more than {MAX_DELAY_S} s ahead")
        body = json.dumps({"runId": run_id, "wakeAt": wake_at_ms}, separators=(",", ":"))
        try:
            self._client_factory().send_message(
                QueueUrl=self.queue_url, MessageBody=body, DelaySeconds=delay
            )
        except Exception as exc:
            reraise(exc, f"queueing the alarm of run {run_id}")

    def disarm(self, run_id: str, wake_at_ms: int | None = None) -> None:
        """Nothing to do: a delivered message whose run has nothing due is dropped."""


class HorizonAlarmClock:
    """Routes each alarm by how far ahead it is.

    Args:
        near: The precise path (SQS), for wake-ups up to ``horizon_ms`` ahead.
        far: The Scheduler path, armed ``lead_ms`` before the wake time.
        clock: Time source.
        horizon_ms: The largest wake-up distance the near path takes (900 s).
        lead_ms: How early the far alarm fires, so its re-arm lands on the near path.
    """

    def __init__(
        self,
        *,
        near: AlarmClock,
        far: AlarmClock,
        clock: Clock,
        horizon_ms: int = MAX_DELAY_S * 1000,
        lead_ms: int = DEFAULT_LEAD_MS,
    ) -> None:
        if not 0 < lead_ms < horizon_ms <= MAX_DELAY_S * 1000:
            raise ValidationError("need 0 < lead < horizon <= 900 s")
        self.near = near
        self.far = far
        self._clock = clock
        self.horizon_ms = horizon_ms
        self.lead_ms = lead_ms

    def arm(self, run_id: str, wake_at_ms: int) -> None:
        """Near wake-ups to the queue; later ones to Scheduler, ``lead_ms`` early."""
        if wake_at_ms - self._clock.now_ms() <= self.horizon_ms:
            self.near.arm(run_id, wake_at_ms)
        else:
            self.far.arm(run_id, wake_at_ms - self.lead_ms)

    def disarm(self, run_id: str, wake_at_ms: int | None = None) -> None:
        """Disarm both paths (the far alarm of ``wake_at_ms`` was armed ``lead_ms`` early)."""
        self.far.disarm(run_id, None if wake_at_ms is None else wake_at_ms - self.lead_ms)
        self.near.disarm(run_id, wake_at_ms)
