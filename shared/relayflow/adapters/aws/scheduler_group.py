"""One EventBridge Scheduler group whose schedules invoke the drive function.

Run alarms and workflows' recurring schedules both live in such a group; this is what they
share: the configuration checked up front, the target every schedule carries, and the calls
(create or update, delete, list, read) with Scheduler's conflicts and missing schedules
handled the same way. Scheduler has no conditional writes: a create that meets an existing
schedule updates it, an update that finds it gone (a one-shot fired and deleted itself)
creates it again.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, NoReturn

from relayflow.adapters.aws.errors import error_code, is_aws_error, reraise
from relayflow.errors import ValidationError

if TYPE_CHECKING:
    from mypy_boto3_scheduler import EventBridgeSchedulerClient

    from relayflow.config import Settings

NAME_LIMIT = 64
_NAME = re.compile(r"^[0-9a-zA-Z\-_.]{1,64}$")
_ROLE_ARN = re.compile(r"^arn:aws[a-z\-]*:iam::\d{12}:role/.+$")
#: Create/update rounds before a schedule that keeps appearing and vanishing is an error.
_MAX_ROUNDS = 3


def check_name(name: str, what: str) -> None:
    """Refuse a group or schedule name Scheduler would refuse."""
    if not _NAME.match(name):
        raise ValidationError(
            f"{what} {name!r} must be 1-{NAME_LIMIT} characters of [0-9a-zA-Z-_.]"
        )


def reraise_scheduler(exc: Exception, action: str) -> NoReturn:
    """Raise ``exc`` as the adapters' error for ``action``."""
    # moto answers a missing schedule group with a bare KeyError; name the group instead.
    if isinstance(exc, KeyError):
        raise ValidationError(f"{action} failed: the schedule group does not exist") from exc
    reraise(exc, action)


def _is(exc: Exception, code: str) -> bool:
    return is_aws_error(exc) and error_code(exc) == code


class SchedulerGroup:
    """A Scheduler group and the drive function its schedules invoke: the base of the run
    alarm clock and of the recurring schedule host.

    Args:
        group: The schedule group.
        target_arn: The drive function.
        role_arn: The role Scheduler assumes to invoke it.
        client_factory: Returns the Scheduler client (called on first use, then cached).
        dlq_arn: Queue for firings Scheduler could not deliver.
        max_retry_attempts: Scheduler's retries of a failed delivery (0-185).
        max_event_age_s: How long Scheduler keeps retrying one firing (60-86400 s; by
            default :attr:`default_event_age_s`).
    """

    #: How long Scheduler keeps retrying one firing unless told otherwise.
    default_event_age_s = 86_400

    def __init__(
        self,
        *,
        group: str,
        target_arn: str,
        role_arn: str,
        client_factory: Callable[[], EventBridgeSchedulerClient],
        dlq_arn: str | None = None,
        max_retry_attempts: int = 185,
        max_event_age_s: int | None = None,
    ) -> None:
        if max_event_age_s is None:
            max_event_age_s = self.default_event_age_s
        check_name(group, "schedule group")
        if not _ROLE_ARN.match(role_arn):
            raise ValidationError(f"scheduler role must be an IAM role ARN, got {role_arn!r}")
        if not target_arn.startswith("arn:"):
            raise ValidationError(f"schedule target must be an ARN, got {target_arn!r}")
        if not 0 <= max_retry_attempts <= 185:
            raise ValidationError("max_retry_attempts must be between 0 and 185")
        if not 60 <= max_event_age_s <= 86_400:
            raise ValidationError("max_event_age_s must be between 60 and 86400 seconds")
        self.group = group
        self.target_arn = target_arn
        self.role_arn = role_arn
        self.dlq_arn = dlq_arn
        self._client_factory = client_factory
        self._client: EventBridgeSchedulerClient | None = None
        self._retry_policy = {
            "MaximumRetryAttempts": max_retry_attempts,
            "MaximumEventAgeInSeconds": max_event_age_s,
        }

    @staticmethod
    def _drive_target(settings: Settings) -> dict[str, Any]:
        """The drive function, Scheduler's role and the dead-letter queue ``settings`` name."""
        return {
            "target_arn": settings.require("drive_function_arn"),
            "role_arn": settings.require("scheduler_role_arn"),
            "dlq_arn": settings.dlq_arn,
        }

    def _scheduler(self) -> EventBridgeSchedulerClient:
        """The Scheduler client, created on first use."""
        if self._client is None:
            self._client = self._client_factory()
        return self._client

    def _target(self, payload: str) -> dict[str, Any]:
        """The target of a schedule invoking the drive function with ``payload`` (JSON)."""
        target: dict[str, Any] = {
            "Arn": self.target_arn,
            "RoleArn": self.role_arn,
            "Input": payload,
            "RetryPolicy": dict(self._retry_policy),
        }
        if self.dlq_arn:
            target["DeadLetterConfig"] = {"Arn": self.dlq_arn}
        return target

    def _put_schedule(self, params: Mapping[str, Any], action: str) -> None:
        """Create the schedule ``params`` describes, or update it when it exists."""
        client = self._scheduler()
        for _ in range(_MAX_ROUNDS):
            try:
                client.create_schedule(**params)
                return
            except Exception as exc:
                if not _is(exc, "ConflictException"):
                    reraise_scheduler(exc, action)
            try:
                client.update_schedule(**params)
                return
            except Exception as exc:
                # It fired (and was deleted) between our create and update: create it again.
                if not _is(exc, "ResourceNotFoundException"):
                    reraise_scheduler(exc, action)
        raise ValidationError(f"{action} failed: the schedule kept changing while it was written")

    def _delete_schedule(self, name: str, action: str) -> None:
        """Delete the schedule ``name``; a missing one counts as deleted."""
        try:
            self._scheduler().delete_schedule(Name=name, GroupName=self.group)
        except Exception as exc:
            if not _is(exc, "ResourceNotFoundException"):
                reraise_scheduler(exc, action)

    def _schedule_names(self, prefix: str, action: str) -> list[str]:
        """Names of the group's schedules that start with ``prefix``, every page."""
        names: list[str] = []
        params: dict[str, Any] = {"GroupName": self.group, "NamePrefix": prefix}
        while True:
            try:
                page = self._scheduler().list_schedules(**params)
            except Exception as exc:
                reraise_scheduler(exc, action)
            names.extend(
                str(item["Name"])
                for item in page.get("Schedules", [])
                if str(item["Name"]).startswith(prefix)
            )
            token = page.get("NextToken")
            if not token:
                return names
            params["NextToken"] = token

    def _read_schedule(self, name: str, action: str) -> Mapping[str, Any] | None:
        """The schedule ``name`` as Scheduler describes it, or None when there is none."""
        try:
            return self._scheduler().get_schedule(Name=name, GroupName=self.group)
        except Exception as exc:
            if _is(exc, "ResourceNotFoundException"):
                return None
            reraise_scheduler(exc, action)
