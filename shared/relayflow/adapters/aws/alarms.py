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
from typing import TYPE_CHECKING, Any, NoReturn

from relayflow.adapters.aws.errors import (
    AwsServiceError,
    error_code,
    is_aws_error,
    reraise,
    translate,
)
from relayflow.adapters.memory.clock import wall_ms
from relayflow.errors import ValidationError
from relayflow.ports import Clock

if TYPE_CHECKING:
    from mypy_boto3_lambda import LambdaClient
    from mypy_boto3_scheduler import EventBridgeSchedulerClient

    from relayflow.config import Settings

NAME_LIMIT = 64
INPUT_LIMIT = 8192
_NAME = re.compile(r"^[0-9a-zA-Z\-_.]{1,64}$")
_UNSAFE = re.compile(r"[^0-9a-zA-Z\-_.]")
_AT = re.compile(r"^at\(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\)$")
_ROLE_ARN = re.compile(r"^arn:aws[a-z\-]*:iam::\d{12}:role/.+$")
_HASH_CHARS = 16
#: Base-36 digits of the wake second in a schedule name (enough until the year 4000).
_WAKE_CHARS = 7
_MAX_ROUNDS = 3

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
    _check_name(name, "schedule name")
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


class SchedulerAlarmClock:
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
        _check_name(group, "schedule group")
        if not _ROLE_ARN.match(role_arn):
            raise ValidationError(f"scheduler role must be an IAM role ARN, got {role_arn!r}")
        if not target_arn.startswith("arn:"):
            raise ValidationError(f"alarm target must be an ARN, got {target_arn!r}")
        if not 0 <= max_retry_attempts <= 185:
            raise ValidationError("max_retry_attempts must be between 0 and 185")
        if not 60 <= max_event_age_s <= 86_400:
            raise ValidationError("max_event_age_s must be between 60 and 86400 seconds")
        self.group = group
        self.target_arn = target_arn
        self.role_arn = role_arn
        self.dlq_arn = dlq_arn
        self.name_prefix = name_prefix
        self._client_factory = client_factory
        self._client: EventBridgeSchedulerClient | None = None
        self._clock: Clock = clock or _SystemClock()
        self._on_due = on_due
        self._retry_policy = {
            "MaximumRetryAttempts": max_retry_attempts,
            "MaximumEventAgeInSeconds": max_event_age_s,
        }

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
            target_arn=settings.require("drive_function_arn"),
            role_arn=settings.require("scheduler_role_arn"),
            dlq_arn=settings.dlq_arn,
            client_factory=client_factory,
            clock=clock,
            on_due=on_due,
        )

    def _scheduler(self) -> EventBridgeSchedulerClient:
        if self._client is None:
            self._client = self._client_factory()
        return self._client

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
        client = self._scheduler()
        for _ in range(_MAX_ROUNDS):
            try:
                client.create_schedule(**params)
                return
            except Exception as exc:
                if not is_aws_error(exc) or error_code(exc) != "ConflictException":
                    _reraise(exc, f"arming the alarm of run {run_id}")
            try:
                client.update_schedule(**params)
                return
            except Exception as exc:
                # It fired (and was deleted) between our create and update: create it again.
                if not is_aws_error(exc) or error_code(exc) != "ResourceNotFoundException":
                    _reraise(exc, f"re-arming the alarm of run {run_id}")
        raise ValidationError(f"the alarm of run {run_id} kept changing while it was armed")

    def disarm(self, run_id: str, wake_at_ms: int | None = None) -> None:
        """Delete the run's alarm for ``wake_at_ms`` (every alarm of the run when None); an
        alarm that does not exist counts as disarmed."""
        if wake_at_ms is not None:
            self._delete(run_id, self.name_of(run_id, wake_at_ms))
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
            self._delete(run_id, name)

    def _delete(self, run_id: str, name: str) -> None:
        try:
            self._scheduler().delete_schedule(Name=name, GroupName=self.group)
        except Exception as exc:
            if is_aws_error(exc) and error_code(exc) == "ResourceNotFoundException":
                return
            _reraise(exc, f"disarming the alarm of run {run_id}")

    def _names_of(self, run_id: str) -> list[str]:
        """Names of every schedule the run has armed."""
        prefix = run_prefix(run_id, self.name_prefix)
        names: list[str] = []
        params: dict[str, Any] = {"GroupName": self.group, "NamePrefix": prefix}
        while True:
            try:
                page = self._scheduler().list_schedules(**params)
            except Exception as exc:
                _reraise(exc, f"listing the alarms of run {run_id}")
            names.extend(str(item["Name"]) for item in page.get("Schedules", []))
            token = page.get("NextToken")
            if not token:
                return names
            params["NextToken"] = token

    def armed_at(self, run_id: str) -> str | None:
        """The schedule expression of the run's latest alarm, or None when none is armed."""
        expressions: list[str] = []
        for name in self._names_of(run_id):
            try:
                answer = self._scheduler().get_schedule(Name=name, GroupName=self.group)
            except Exception as exc:
                if is_aws_error(exc) and error_code(exc) == "ResourceNotFoundException":
                    continue
                _reraise(exc, f"reading the alarm of run {run_id}")
            expression = answer.get("ScheduleExpression")
            if isinstance(expression, str):
                expressions.append(expression)
        return max(expressions) if expressions else None

    def _schedule_params(self, run_id: str, wake_at_ms: int, fire_at_ms: int) -> dict[str, Any]:
        payload = json.dumps({"runId": run_id, "wakeAt": wake_at_ms}, separators=(",", ":"))
        if len(payload) > INPUT_LIMIT:
            raise ValidationError(f"the alarm input of run {run_id} exceeds {INPUT_LIMIT} chars")
        target: dict[str, Any] = {
            "Arn": self.target_arn,
            "RoleArn": self.role_arn,
            "Input": payload,
            "RetryPolicy": dict(self._retry_policy),
        }
        if self.dlq_arn:
            target["DeadLetterConfig"] = {"Arn": self.dlq_arn}
        return {
            "Name": self.name_of(run_id, wake_at_ms),
            "GroupName": self.group,
            "ScheduleExpression": at_expression(fire_at_ms),
            "ScheduleExpressionTimezone": "UTC",
            "FlexibleTimeWindow": {"Mode": "OFF"},
            "ActionAfterCompletion": "DELETE",
            "State": "ENABLED",
            "Target": target,
        }


def _check_name(name: str, what: str) -> None:
    if not _NAME.match(name):
        raise ValidationError(
            f"{what} {name!r} must be 1-{NAME_LIMIT} characters of [0-9a-zA-Z-_.]"
        )


def _reraise(exc: Exception, action: str) -> NoReturn:
    # moto answers a missing schedule group with a bare KeyError; name the group instead.
    if isinstance(exc, KeyError):
        raise ValidationError(f"{action} failed: the schedule group does not exist") from exc
    reraise(exc, action)
