"""Run alarms as EventBridge Scheduler one-time schedules that invoke the drive function.

One schedule per wake time of a run, named from the run id and that wake time (UTC, rounded
up to the second), deleted by Scheduler after it fires. Scheduler has no conditional writes, so
names carry the wake they are for: a late disarm removes only the schedule of the wake it
names, never one armed since for another, and a schedule left from an earlier wake fires once
and finds nothing due (harmless). Arming and disarming are idempotent.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from relayflow.adapters.aws.errors import AwsServiceError, is_aws_error, translate
from relayflow.adapters.aws.scheduler_group import NAME_LIMIT, SchedulerGroup, check_name
from relayflow.clock import wall_ms
from relayflow.drive.delivery import VIA, VIA_SCHEDULER
from relayflow.errors import ValidationError
from relayflow.ports import Clock

if TYPE_CHECKING:
    from mypy_boto3_lambda import LambdaClient
    from mypy_boto3_scheduler import EventBridgeSchedulerClient

    from relayflow.config import Settings

INPUT_LIMIT = 8192
_UNSAFE = re.compile(r"[^0-9a-zA-Z\-_.]")
_AT = re.compile(r"^at\(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\)$")
_HASH_CHARS = 16
#: Base-36 digits of the wake second in a schedule name (enough until the year 4000).
_WAKE_CHARS = 7

#: Called instead of arming when a wake time has already passed: ``on_due(run_id, wake_at_ms)``.
DueCallback = Callable[[str, int], None]


class _SystemClock:
    def now_ms(self) -> int:
        return wall_ms()


def run_prefix(run_id: str, prefix: str = "rf-") -> str:
    """The start shared by every schedule name of a run: a readable part of its id and a hash.

    Characters Scheduler does not allow become ``_``; the hash of the full id keeps names of
    different runs apart even when their readable parts collide.
    """
    digest = hashlib.sha256(run_id.encode("utf-8")).hexdigest()[:_HASH_CHARS]
    room = NAME_LIMIT - len(prefix) - 2 - _HASH_CHARS - _WAKE_CHARS
    readable = _UNSAFE.sub("_", run_id)[: max(room, 0)]
    return f"{prefix}{readable}-{digest}-" if readable else f"{prefix}{digest}-"


def legacy_schedule_name(run_id: str, prefix: str = "rf-") -> str:
    """The one schedule name per run that releases before wake-named schedules used."""
    digest = hashlib.sha256(run_id.encode("utf-8")).hexdigest()[:_HASH_CHARS]
    room = NAME_LIMIT - len(prefix) - 1 - _HASH_CHARS
    readable = _UNSAFE.sub("_", run_id)[: max(room, 0)]
    return f"{prefix}{readable}-{digest}" if readable else f"{prefix}{digest}"


def schedule_name(run_id: str, wake_at_ms: int, prefix: str = "rf-") -> str:
    """The schedule name of a run's alarm for ``wake_at_ms``, at most 64 characters."""
    seconds = -(-wake_at_ms // 1000)
    name = f"{run_prefix(run_id, prefix)}{_base36(seconds).rjust(_WAKE_CHARS, '0')}"
    check_name(name, "schedule name")
    return name


def _base36(value: int) -> str:
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    value = max(0, value)
    while True:
        value, rest = divmod(value, 36)
        out = digits[rest] + out
        if value == 0:
            return out


def at_expression(wake_at_ms: int) -> str:
    """``at(yyyy-mm-ddThh:mm:ss)`` in UTC, rounded up to the next whole second."""
    seconds = -(-wake_at_ms // 1000)
    stamp = datetime.fromtimestamp(seconds, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S")
    expression = f"at({stamp})"
    if not _AT.match(expression):
        raise ValidationError(f"wake time {wake_at_ms} gives an invalid expression {expression}")
    return expression


def lambda_event_on_due(
    function_arn: str, client_factory: Callable[[], LambdaClient]
) -> DueCallback:
    """An ``on_due`` that invokes the drive function asynchronously, as the alarm would."""

    def on_due(run_id: str, wake_at_ms: int) -> None:
        payload = json.dumps({"runId": run_id, "wakeAt": wake_at_ms}).encode("utf-8")
        try:
            client_factory().invoke(
                FunctionName=function_arn, InvocationType="Event", Payload=payload
            )
        except Exception as exc:
            if is_aws_error(exc):
                raise translate(exc, f"driving run {run_id} now") from exc
            raise

    return on_due


class SchedulerAlarmClock(SchedulerGroup):
    """An :class:`~relayflow.ports.AlarmClock` on EventBridge Scheduler.

    ``arm`` creates the one-time schedule of the run's wake, or updates it when one exists;
    schedules of other wakes are left alone. A wake time that is not in the future is not
    armed: ``on_due(run_id, wake_at_ms)`` is called at once; without ``on_due`` the schedule
    is armed for the next second instead.

    Args:
        group: The deployment's schedule group.
        target_arn: The drive function the schedule invokes with ``{"runId", "wakeAt"}``.
        role_arn: The role Scheduler assumes to invoke it.
        client_factory: Returns the Scheduler client (called on first use, then cached).
        dlq_arn: SQS queue for alarms Scheduler fails to deliver.
        clock: Tells whether a wake time has passed (the wall clock by default).
        on_due: Drives a run whose wake time has passed (see above).
        max_retry_attempts: Scheduler's retries of a failed delivery (0-185).
        max_event_age_s: How long Scheduler keeps retrying (60-86400 s).
        name_prefix: Prefix of schedule names.
    """

    def __init__(
        self,
        *,
        group: str,
        target_arn: str,
        role_arn: str,
        client_factory: Callable[[], EventBridgeSchedulerClient],
        dlq_arn: str | None = None,
        clock: Clock | None = None,
        on_due: DueCallback | None = None,
        max_retry_attempts: int = 185,
        max_event_age_s: int = 86_400,
        name_prefix: str = "rf-",
    ) -> None:
        super().__init__(
            group=group,
            target_arn=target_arn,
            role_arn=role_arn,
            client_factory=client_factory,
            dlq_arn=dlq_arn,
            max_retry_attempts=max_retry_attempts,
            max_event_age_s=max_event_age_s,
        )
        self.name_prefix = name_prefix
        self._clock: Clock = clock or _SystemClock()
        self._on_due = on_due

    @classmethod
    def from_settings(
        cls,
        settings: Settings,
        *,
        client_factory: Callable[[], EventBridgeSchedulerClient],
        clock: Clock | None = None,
        on_due: DueCallback | None = None,
    ) -> SchedulerAlarmClock:
        """An alarm clock configured by ``RELAYFLOW_SCHEDULE_GROUP`` and friends."""
        return cls(
            group=settings.require("schedule_group"),
            client_factory=client_factory,
            clock=clock,
            on_due=on_due,
            **cls._drive_target(settings),
        )

    def name_of(self, run_id: str, wake_at_ms: int) -> str:
        """The schedule name of ``run_id``'s alarm for ``wake_at_ms``."""
        return schedule_name(run_id, wake_at_ms, self.name_prefix)

    def arm(self, run_id: str, wake_at_ms: int) -> None:
        """Make the run's alarm fire at ``wake_at_ms``.

        A schedule armed for an earlier wake is left to fire and find nothing due: deleting
        it here could race with a newer arming of it elsewhere.
        """
        now = self._clock.now_ms()
        fire_at_ms = wake_at_ms
        if wake_at_ms <= now:
            if self._on_due is not None:
                self._on_due(run_id, wake_at_ms)
                return
            # Scheduler refuses times in the past; the drive is still told the real wake time.
            fire_at_ms = now + 1000
        params = self._schedule_params(run_id, wake_at_ms, fire_at_ms)
        self._put_schedule(params, f"arming the alarm of run {run_id}")

    def disarm(self, run_id: str, wake_at_ms: int | None = None) -> None:
        """Delete the run's alarm for ``wake_at_ms`` (every alarm of the run when None); an
        alarm that does not exist counts as disarmed."""
        action = f"disarming the alarm of run {run_id}"
        if wake_at_ms is not None:
            self._delete_schedule(self.name_of(run_id, wake_at_ms), action)
            return
        # A run armed before alarms were named after their wake has one schedule by the old
        # name; listing needs scheduler:ListSchedules, without which only that one goes (a
        # schedule left behind fires once and finds nothing due).
        names = {legacy_schedule_name(run_id, self.name_prefix)}
        try:
            names.update(self._names_of(run_id))
        except AwsServiceError as exc:
            if exc.aws_code != "AccessDeniedException":
                raise
        for name in sorted(names):
            self._delete_schedule(name, action)

    def _names_of(self, run_id: str) -> list[str]:
        """Names of every schedule the run has armed."""
        prefix = run_prefix(run_id, self.name_prefix)
        return self._schedule_names(prefix, f"listing the alarms of run {run_id}")

    def armed_at(self, run_id: str) -> str | None:
        """The schedule expression of the run's latest alarm, or None when none is armed."""
        expressions: list[str] = []
        for name in self._names_of(run_id):
            answer = self._read_schedule(name, f"reading the alarm of run {run_id}")
            expression = answer.get("ScheduleExpression") if answer is not None else None
            if isinstance(expression, str):
                expressions.append(expression)
        return max(expressions) if expressions else None

    def _schedule_params(self, run_id: str, wake_at_ms: int, fire_at_ms: int) -> dict[str, Any]:
        # Marked as the Scheduler's, so that the drive it fires counts its invocation.
        payload = json.dumps(
            {"runId": run_id, "wakeAt": wake_at_ms, VIA: VIA_SCHEDULER}, separators=(",", ":")
        )
        if len(payload) > INPUT_LIMIT:
            raise ValidationError(f"the alarm input of run {run_id} exceeds {INPUT_LIMIT} chars")
        return {
            "Name": self.name_of(run_id, wake_at_ms),
            "GroupName": self.group,
            "ScheduleExpression": at_expression(fire_at_ms),
            "ScheduleExpressionTimezone": "UTC",
            "FlexibleTimeWindow": {"Mode": "OFF"},
            "ActionAfterCompletion": "DELETE",
            "State": "ENABLED",
            "Target": self._target(payload),
        }
