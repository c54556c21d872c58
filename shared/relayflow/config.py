"""Deployment settings read from the environment, and the ``ENV_*`` names infrastructure sets.

Nothing is read at import: call :meth:`Settings.from_env` (or :func:`current_settings`, which
caches it) when a value is first needed.
"""

from __future__ import annotations

import functools
import importlib
import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, cast

from relayflow.errors import ValidationError

if TYPE_CHECKING:
    from relayflow.core.settings import CoreSettings

ENV_TABLE_NAME = "RELAYFLOW_TABLE_NAME"
ENV_MANIFESTS_TABLE = "RELAYFLOW_MANIFESTS_TABLE"
ENV_MANIFESTS_BUCKET = "RELAYFLOW_MANIFESTS_BUCKET"
ENV_PAYLOAD_BUCKET = "RELAYFLOW_PAYLOAD_BUCKET"
ENV_SCHEDULE_GROUP = "RELAYFLOW_SCHEDULE_GROUP"
ENV_SCHEDULER_ROLE_ARN = "RELAYFLOW_SCHEDULER_ROLE_ARN"
ENV_DRIVE_FUNCTION_ARN = "RELAYFLOW_DRIVE_FUNCTION_ARN"
ENV_DLQ_ARN = "RELAYFLOW_DLQ_ARN"
ENV_RECURRING_SCHEDULE_GROUP = "RELAYFLOW_RECURRING_SCHEDULE_GROUP"
ENV_ALARM_QUEUE_URL = "RELAYFLOW_ALARM_QUEUE_URL"
ENV_SIGNING_SECRET = "RELAYFLOW_SIGNING_SECRET"
ENV_SIGNING_MODE = "RELAYFLOW_SIGNING_MODE"
ENV_INLINE_DRIVE_BUDGET = "RELAYFLOW_INLINE_DRIVE_BUDGET"
ENV_INLINE_PAYLOAD_CAP = "RELAYFLOW_INLINE_PAYLOAD_CAP"
ENV_RETENTION_DAYS = "RELAYFLOW_RETENTION_DAYS"
ENV_MANIFEST_KEEP = "RELAYFLOW_MANIFEST_KEEP"
ENV_DISPATCHER = "RELAYFLOW_DISPATCHER"
ENV_DISPATCH_FUNCTION = "RELAYFLOW_DISPATCH_FUNCTION"
ENV_DISPATCH_URL = "RELAYFLOW_DISPATCH_URL"
ENV_DISPATCH_MAP = "RELAYFLOW_DISPATCH_MAP"
ENV_DISPATCH_CONNECT_TIMEOUT = "RELAYFLOW_DISPATCH_CONNECT_TIMEOUT"
ENV_DISPATCH_READ_TIMEOUT = "RELAYFLOW_DISPATCH_READ_TIMEOUT"
ENV_DISPATCH_RETRIES = "RELAYFLOW_DISPATCH_RETRIES"
ENV_REGION = "RELAYFLOW_REGION"
ENV_DRIVE_BUDGET = "RELAYFLOW_DRIVE_BUDGET"
ENV_SWEEP_BUDGET = "RELAYFLOW_SWEEP_BUDGET"
ENV_LAMBDA_MARGIN = "RELAYFLOW_LAMBDA_MARGIN"
ENV_INVOCATION_TIMEOUT = "RELAYFLOW_INVOCATION_TIMEOUT"
ENV_LEASE = "RELAYFLOW_LEASE"
ENV_LEASE_GRACE = "RELAYFLOW_LEASE_GRACE"
ENV_CHILD_RECHECK = "RELAYFLOW_CHILD_RECHECK"
ENV_OPERATIONS_LIMIT = "RELAYFLOW_OPERATIONS_LIMIT"
ENV_INBOX_LIMIT = "RELAYFLOW_INBOX_LIMIT"
ENV_RECENT_DELIVERY_IDS = "RELAYFLOW_RECENT_DELIVERY_IDS"
ENV_DELIVERY_ID_MEMORY = "RELAYFLOW_DELIVERY_ID_MEMORY"
ENV_DISPATCH_MAX_ATTEMPTS = "RELAYFLOW_DISPATCH_MAX_ATTEMPTS"
ENV_DISPATCH_BACKOFF = "RELAYFLOW_DISPATCH_BACKOFF"
ENV_DISPATCH_BACKOFF_MAX = "RELAYFLOW_DISPATCH_BACKOFF_MAX"
ENV_CHECKPOINT_TABLE = "RELAYFLOW_CHECKPOINT_TABLE"
ENV_HTTP_CHECKPOINT_URL = "RELAYFLOW_HTTP_CHECKPOINT_URL"
ENV_REQUIRE_PER_STEP_DURABILITY = "RELAYFLOW_REQUIRE_PER_STEP_DURABILITY"
ENV_OVERRUN_GRACE_MAX = "RELAYFLOW_OVERRUN_GRACE_MAX"
#: Comma-separated modules imported before a function serves, so that the workflows they
#: define (and their ``trigger_on`` filters) are registered (``examples`` in the sample stack).
ENV_WORKFLOW_MODULES = "RELAYFLOW_WORKFLOW_MODULES"

#: Every variable :meth:`Settings.from_env` reads (besides ``AWS_REGION``/``AWS_DEFAULT_REGION``).
ALL_ENV_NAMES: tuple[str, ...] = (
    ENV_TABLE_NAME,
    ENV_MANIFESTS_TABLE,
    ENV_MANIFESTS_BUCKET,
    ENV_PAYLOAD_BUCKET,
    ENV_SCHEDULE_GROUP,
    ENV_SCHEDULER_ROLE_ARN,
    ENV_DRIVE_FUNCTION_ARN,
    ENV_DLQ_ARN,
    ENV_RECURRING_SCHEDULE_GROUP,
    ENV_ALARM_QUEUE_URL,
    ENV_SIGNING_SECRET,
    ENV_SIGNING_MODE,
    ENV_INLINE_DRIVE_BUDGET,
    ENV_INLINE_PAYLOAD_CAP,
    ENV_RETENTION_DAYS,
    ENV_MANIFEST_KEEP,
    ENV_DISPATCHER,
    ENV_DISPATCH_FUNCTION,
    ENV_DISPATCH_URL,
    ENV_DISPATCH_MAP,
    ENV_DISPATCH_CONNECT_TIMEOUT,
    ENV_DISPATCH_READ_TIMEOUT,
    ENV_DISPATCH_RETRIES,
    ENV_REGION,
    ENV_DRIVE_BUDGET,
    ENV_SWEEP_BUDGET,
    ENV_LAMBDA_MARGIN,
    ENV_INVOCATION_TIMEOUT,
    ENV_LEASE,
    ENV_LEASE_GRACE,
    ENV_CHILD_RECHECK,
    ENV_OPERATIONS_LIMIT,
    ENV_INBOX_LIMIT,
    ENV_RECENT_DELIVERY_IDS,
    ENV_DELIVERY_ID_MEMORY,
    ENV_DISPATCH_MAX_ATTEMPTS,
    ENV_DISPATCH_BACKOFF,
    ENV_DISPATCH_BACKOFF_MAX,
    ENV_CHECKPOINT_TABLE,
    ENV_HTTP_CHECKPOINT_URL,
    ENV_REQUIRE_PER_STEP_DURABILITY,
    ENV_OVERRUN_GRACE_MAX,
)

DispatcherKind = Literal["inline", "lambda", "http"]
SigningMode = Literal["relayflow", "voyant"]
DISPATCHER_KINDS: tuple[str, ...] = ("inline", "lambda", "http")
SIGNING_MODES: tuple[str, ...] = ("relayflow", "voyant")

DEFAULT_INLINE_DRIVE_BUDGET_MS = 10_000
DEFAULT_INLINE_PAYLOAD_CAP = 32 * 1024
DEFAULT_RETENTION_DAYS = 30
DEFAULT_MANIFEST_KEEP = 3
DEFAULT_CONNECT_TIMEOUT_S = 3.05
DEFAULT_READ_TIMEOUT_S = 2.0
DEFAULT_DISPATCH_RETRIES = 2
DEFAULT_DRIVE_BUDGET_MS = 840_000
DEFAULT_SWEEP_BUDGET_MS = 240_000
DEFAULT_LAMBDA_MARGIN_MS = 3_000
DEFAULT_INVOCATION_TIMEOUT_MS = 600_000
DEFAULT_LEASE_MS = 60_000
DEFAULT_LEASE_GRACE_MS = 5_000
DEFAULT_CHILD_RECHECK_MS = 900_000
DEFAULT_OPERATIONS_LIMIT = 100_000
DEFAULT_INBOX_LIMIT = 1_000
DEFAULT_RECENT_DELIVERY_IDS = 100
DEFAULT_DELIVERY_ID_MEMORY_MS = 365 * 86_400_000
DEFAULT_DISPATCH_MAX_ATTEMPTS = 5
DEFAULT_DISPATCH_BACKOFF_MS = 1_000
DEFAULT_DISPATCH_BACKOFF_MAX_MS = 60_000
DEFAULT_OVERRUN_GRACE_MAX_MS = 300_000

_DURATION = re.compile(r"^\s*(\d+)\s*(ms|s|m|h|d|w)?\s*$")
_UNIT_MS = {"ms": 1, "s": 1_000, "m": 60_000, "h": 3_600_000, "d": 86_400_000, "w": 604_800_000}


@dataclass(frozen=True)
class DispatchTarget:
    """Where step requests of some workflows go.

    Attributes:
        kind: ``inline`` (same process), ``lambda`` or ``http``.
        target: The function name/ARN (``lambda``) or URL (``http``); empty for ``inline``.
    """

    kind: DispatcherKind
    target: str = ""

    @classmethod
    def parse(cls, value: Any, *, where: str) -> DispatchTarget:
        """Read ``"inline"``, ``"lambda:<name>"``, ``"http:<url>"`` or ``{"kind", "target"}``."""
        if isinstance(value, str):
            kind, _, target = value.partition(":")
        elif isinstance(value, dict) and isinstance(value.get("kind"), str):
            kind, target = value["kind"], value.get("target", "")
        else:
            raise ValidationError(
                f"{where}: expected 'inline', 'lambda:<function>', 'http:<url>' or "
                f'{{"kind": ..., "target": ...}}, got {value!r}'
            )
        kind = kind.strip()
        if kind not in DISPATCHER_KINDS:
            raise ValidationError(
                f"{where}: dispatcher kind must be one of {', '.join(DISPATCHER_KINDS)}, "
                f"got {kind!r}"
            )
        if not isinstance(target, str):
            raise ValidationError(f"{where}: target must be a string, got {target!r}")
        target = target.strip()
        if kind != "inline" and not target:
            raise ValidationError(f"{where}: a {kind} dispatcher needs a target")
        return cls(kind=cast(DispatcherKind, kind), target=target)


@dataclass(frozen=True)
class Settings:
    """Everything a deployment configures through environment variables.

    Resource names are ``None`` when unset; adapters that need one call :meth:`require`.

    Attributes:
        table_name: DynamoDB table of runs (``RELAYFLOW_TABLE_NAME``).
        manifests_table: DynamoDB table of manifests (``RELAYFLOW_MANIFESTS_TABLE``).
        manifests_bucket: S3 bucket for manifests too large for an item.
        payload_bucket: S3 bucket for values over the inline cap.
        schedule_group: EventBridge Scheduler group holding the run alarms.
        scheduler_role_arn: Role Scheduler assumes to invoke the drive function.
        drive_function_arn: The drive Lambda that alarms invoke with ``{"runId", "wakeAt"}``.
        dlq_arn: SQS queue receiving alarms Scheduler could not deliver.
        recurring_schedule_group: Scheduler group of the workflows' recurring schedules
            (``RELAYFLOW_RECURRING_SCHEDULE_GROUP``; unset: schedules are not hosted).
        alarm_queue_url: SQS queue delivering wake-ups less than 15 minutes ahead to the
            drive function (``RELAYFLOW_ALARM_QUEUE_URL``; unset: Scheduler only).
        signing_secret: Shared secret signing step requests (``None``: unsigned).
        signing_mode: ``relayflow`` (timestamped, hex) or ``voyant`` (reference-compatible).
        inline_drive_budget_ms: How long an API request drives or waits for its run.
        drive_budget_ms: How long one call of the drive function drives.
        sweep_budget_ms: How long one call of the sweeper drives.
        lambda_margin_ms: Kept free before a Lambda's end: each budget is capped by the
            function's remaining time less this.
        invocation_timeout_ms: Longest step request deadline.
        lease_ms: How long a driver's lease lasts without renewal (renewed every third of it
            while an invocation is in flight).
        lease_grace_ms: Time between a request's deadline and the latest end of its lease.
        child_recheck_ms: How often a parent checks its attached children.
        operations_limit: Operations a run may use before it fails.
        inbox_limit: Early deliveries buffered per run.
        recent_delivery_ids: Delivery ids also kept on the run (closes the window between
            claiming an id and delivering it).
        delivery_id_memory_ms: How long ``Idempotency-Key`` answers are remembered (plus
            the retention); a run's delivery ids are kept for its whole life instead.
        dispatch_max_attempts: Attempts of one invocation against an unreachable host.
        dispatch_backoff_ms: Delay after the first transient dispatch failure (doubles).
        dispatch_backoff_max_ms: Cap of that delay.
        inline_payload_cap: Values larger than this (bytes of JSON) go to the payload bucket.
        retention_days: Days finished runs are kept before the TTL removes them.
        manifest_keep: Manifest versions kept per environment (the current one always is).
        dispatcher: The default dispatcher of step requests.
        dispatch_map: Per workflow id (or ``tenantScript``) dispatcher overrides.
        connect_timeout_s: HTTP dispatch connect timeout.
        read_timeout_s: How long past a step request's deadline the HTTP dispatcher still
            waits for the answer (its read timeout is the time to the deadline plus this).
        dispatch_retries: Extra attempts after a transient dispatch failure.
        region: AWS region (``RELAYFLOW_REGION``, else ``AWS_REGION``/``AWS_DEFAULT_REGION``).
        checkpoint_table: Set in a step host function (the runs table): the host writes
            per-step checkpoints into it (``RELAYFLOW_CHECKPOINT_TABLE``); unset, the host
            keeps invocation-level durability.
        http_checkpoint_url: The orchestrator API's base URL as HTTP step hosts reach it
            (``RELAYFLOW_HTTP_CHECKPOINT_URL``): set, HTTP dispatchers offer their hosts
            per-step checkpoints through ``POST <url>/api/runs/{runId}/checkpoints``
            (needs the signing secret); unset, HTTP hosts are durable per invocation.
        require_per_step_durability: Refuse per-invocation durability
            (``RELAYFLOW_REQUIRE_PER_STEP_DURABILITY``): a run whose step host cannot
            checkpoint each step fails with ``durability_unavailable`` instead of running
            durable per invocation.
        overrun_grace_max_ms: The longest a step's next attempt waits for the code of an
            attempt given up at its timeout that still runs in the step host (the wait is
            twice the step's timeout, capped by this; ``RELAYFLOW_OVERRUN_GRACE_MAX``).
    """

    table_name: str | None = None
    manifests_table: str | None = None
    manifests_bucket: str | None = None
    payload_bucket: str | None = None
    schedule_group: str | None = None
    scheduler_role_arn: str | None = None
    drive_function_arn: str | None = None
    dlq_arn: str | None = None
    recurring_schedule_group: str | None = None
    alarm_queue_url: str | None = None
    signing_secret: str | None = None
    signing_mode: SigningMode = "relayflow"
    inline_drive_budget_ms: int = DEFAULT_INLINE_DRIVE_BUDGET_MS
    inline_payload_cap: int = DEFAULT_INLINE_PAYLOAD_CAP
    retention_days: int = DEFAULT_RETENTION_DAYS
    manifest_keep: int = DEFAULT_MANIFEST_KEEP
    dispatcher: DispatchTarget = field(default_factory=lambda: DispatchTarget("inline"))
    dispatch_map: Mapping[str, DispatchTarget] = field(default_factory=dict)
    connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S
    read_timeout_s: float = DEFAULT_READ_TIMEOUT_S
    dispatch_retries: int = DEFAULT_DISPATCH_RETRIES
    region: str | None = None
    drive_budget_ms: int = DEFAULT_DRIVE_BUDGET_MS
    sweep_budget_ms: int = DEFAULT_SWEEP_BUDGET_MS
    lambda_margin_ms: int = DEFAULT_LAMBDA_MARGIN_MS
    invocation_timeout_ms: int = DEFAULT_INVOCATION_TIMEOUT_MS
    lease_ms: int = DEFAULT_LEASE_MS
    lease_grace_ms: int = DEFAULT_LEASE_GRACE_MS
    child_recheck_ms: int = DEFAULT_CHILD_RECHECK_MS
    operations_limit: int = DEFAULT_OPERATIONS_LIMIT
    inbox_limit: int = DEFAULT_INBOX_LIMIT
    recent_delivery_ids: int = DEFAULT_RECENT_DELIVERY_IDS
    delivery_id_memory_ms: int = DEFAULT_DELIVERY_ID_MEMORY_MS
    dispatch_max_attempts: int = DEFAULT_DISPATCH_MAX_ATTEMPTS
    dispatch_backoff_ms: int = DEFAULT_DISPATCH_BACKOFF_MS
    dispatch_backoff_max_ms: int = DEFAULT_DISPATCH_BACKOFF_MAX_MS
    checkpoint_table: str | None = None
    http_checkpoint_url: str | None = None
    require_per_step_durability: bool = False
    overrun_grace_max_ms: int = DEFAULT_OVERRUN_GRACE_MAX_MS

    @classmethod
    def from_env(cls, env: Mapping[str, str] = os.environ) -> Settings:
        """Read the settings from ``env`` (the process environment by default).

        Raises:
            ValidationError: A variable is set to a value that cannot be used; the message
                names the variable.
        """

        def text(name: str) -> str | None:
            return _raw(env, name)

        default_kind = text(ENV_DISPATCHER) or "inline"
        if default_kind not in DISPATCHER_KINDS:
            raise ValidationError(
                f"{ENV_DISPATCHER} must be one of {', '.join(DISPATCHER_KINDS)}, "
                f"got {default_kind!r}"
            )
        default_target = {
            "inline": "",
            "lambda": text(ENV_DISPATCH_FUNCTION) or "",
            "http": text(ENV_DISPATCH_URL) or "",
        }[default_kind]
        if default_kind != "inline" and not default_target:
            needed = ENV_DISPATCH_FUNCTION if default_kind == "lambda" else ENV_DISPATCH_URL
            raise ValidationError(f"{ENV_DISPATCHER}={default_kind} needs {needed}")

        mode = text(ENV_SIGNING_MODE) or "relayflow"
        if mode not in SIGNING_MODES:
            raise ValidationError(
                f"{ENV_SIGNING_MODE} must be one of {', '.join(SIGNING_MODES)}, got {mode!r}"
            )
        return cls(
            table_name=text(ENV_TABLE_NAME),
            manifests_table=text(ENV_MANIFESTS_TABLE),
            manifests_bucket=text(ENV_MANIFESTS_BUCKET),
            payload_bucket=text(ENV_PAYLOAD_BUCKET),
            schedule_group=text(ENV_SCHEDULE_GROUP),
            scheduler_role_arn=text(ENV_SCHEDULER_ROLE_ARN),
            drive_function_arn=text(ENV_DRIVE_FUNCTION_ARN),
            dlq_arn=text(ENV_DLQ_ARN),
            recurring_schedule_group=text(ENV_RECURRING_SCHEDULE_GROUP),
            alarm_queue_url=text(ENV_ALARM_QUEUE_URL),
            signing_secret=text(ENV_SIGNING_SECRET),
            signing_mode=cast(SigningMode, mode),
            inline_drive_budget_ms=_duration_ms(
                env, ENV_INLINE_DRIVE_BUDGET, DEFAULT_INLINE_DRIVE_BUDGET_MS
            ),
            inline_payload_cap=_positive_int(
                env, ENV_INLINE_PAYLOAD_CAP, DEFAULT_INLINE_PAYLOAD_CAP
            ),
            retention_days=_positive_int(env, ENV_RETENTION_DAYS, DEFAULT_RETENTION_DAYS),
            manifest_keep=_positive_int(env, ENV_MANIFEST_KEEP, DEFAULT_MANIFEST_KEEP),
            dispatcher=DispatchTarget(cast(DispatcherKind, default_kind), default_target),
            dispatch_map=_dispatch_map(text(ENV_DISPATCH_MAP)),
            connect_timeout_s=_positive_float(
                env, ENV_DISPATCH_CONNECT_TIMEOUT, DEFAULT_CONNECT_TIMEOUT_S
            ),
            read_timeout_s=_positive_float(env, ENV_DISPATCH_READ_TIMEOUT, DEFAULT_READ_TIMEOUT_S),
            dispatch_retries=_non_negative_int(env, ENV_DISPATCH_RETRIES, DEFAULT_DISPATCH_RETRIES),
            region=text(ENV_REGION) or text("AWS_REGION") or text("AWS_DEFAULT_REGION"),
            drive_budget_ms=_duration_ms(env, ENV_DRIVE_BUDGET, DEFAULT_DRIVE_BUDGET_MS),
            sweep_budget_ms=_duration_ms(env, ENV_SWEEP_BUDGET, DEFAULT_SWEEP_BUDGET_MS),
            lambda_margin_ms=_duration_ms(env, ENV_LAMBDA_MARGIN, DEFAULT_LAMBDA_MARGIN_MS),
            invocation_timeout_ms=_duration_ms(
                env, ENV_INVOCATION_TIMEOUT, DEFAULT_INVOCATION_TIMEOUT_MS
            ),
            lease_ms=_duration_ms(env, ENV_LEASE, DEFAULT_LEASE_MS),
            lease_grace_ms=_duration_ms(env, ENV_LEASE_GRACE, DEFAULT_LEASE_GRACE_MS),
            child_recheck_ms=_duration_ms(env, ENV_CHILD_RECHECK, DEFAULT_CHILD_RECHECK_MS),
            operations_limit=_positive_int(env, ENV_OPERATIONS_LIMIT, DEFAULT_OPERATIONS_LIMIT),
            inbox_limit=_positive_int(env, ENV_INBOX_LIMIT, DEFAULT_INBOX_LIMIT),
            recent_delivery_ids=_positive_int(
                env, ENV_RECENT_DELIVERY_IDS, DEFAULT_RECENT_DELIVERY_IDS
            ),
            delivery_id_memory_ms=_duration_ms(
                env, ENV_DELIVERY_ID_MEMORY, DEFAULT_DELIVERY_ID_MEMORY_MS
            ),
            dispatch_max_attempts=_positive_int(
                env, ENV_DISPATCH_MAX_ATTEMPTS, DEFAULT_DISPATCH_MAX_ATTEMPTS
            ),
            dispatch_backoff_ms=_duration_ms(
                env, ENV_DISPATCH_BACKOFF, DEFAULT_DISPATCH_BACKOFF_MS
            ),
            dispatch_backoff_max_ms=_duration_ms(
                env, ENV_DISPATCH_BACKOFF_MAX, DEFAULT_DISPATCH_BACKOFF_MAX_MS
            ),
            checkpoint_table=text(ENV_CHECKPOINT_TABLE),
            http_checkpoint_url=text(ENV_HTTP_CHECKPOINT_URL),
            require_per_step_durability=_flag(env, ENV_REQUIRE_PER_STEP_DURABILITY),
            overrun_grace_max_ms=read_overrun_grace_max_ms(env),
        )

    def core_settings(self) -> CoreSettings:
        """The engine's limits and timings, from these settings.

        Raises:
            ValidationError: A limit cannot be used (the message names it).
        """
        from relayflow.core.settings import CoreSettings

        return CoreSettings(
            operations_limit=self.operations_limit,
            inbox_limit=self.inbox_limit,
            seen_ids_limit=self.recent_delivery_ids,
            dispatch_max_attempts=self.dispatch_max_attempts,
            dispatch_backoff_initial_ms=self.dispatch_backoff_ms,
            dispatch_backoff_max_ms=self.dispatch_backoff_max_ms,
            invocation_timeout_ms=self.invocation_timeout_ms,
            lease_ms=self.lease_ms,
            lease_grace_ms=self.lease_grace_ms,
            drive_budget_ms=self.drive_budget_ms,
            child_reconcile_ms=self.child_recheck_ms,
            require_per_step=self.require_per_step_durability,
        )

    def budget_ms(self, configured_ms: int, lambda_context: Any = None) -> int:
        """A drive's budget: ``configured_ms`` capped by the Lambda's remaining time less
        ``lambda_margin_ms`` (no drive outlives its function)."""
        remaining = getattr(lambda_context, "get_remaining_time_in_millis", None)
        if not callable(remaining):
            return configured_ms
        return max(0, min(configured_ms, int(remaining()) - self.lambda_margin_ms))

    def require(self, name: str) -> str:
        """The value of the string setting ``name``; raises a clear error when it is unset.

        Raises:
            ValidationError: The setting is unset (the message names its variable).
        """
        value = getattr(self, name, None)
        if not isinstance(value, str) or not value:
            variable = _VARIABLE_OF.get(name, name)
            raise ValidationError(f"setting {name} is not configured: set {variable}")
        return value

    def dispatch_target_for(
        self, workflow_id: str, tenant_script: str | None = None
    ) -> DispatchTarget:
        """The dispatcher of a run: its ``tenantScript``, then its workflow id, then the default."""
        if tenant_script and tenant_script in self.dispatch_map:
            return self.dispatch_map[tenant_script]
        return self.dispatch_map.get(workflow_id, self.dispatcher)


_VARIABLE_OF = {
    "table_name": ENV_TABLE_NAME,
    "manifests_table": ENV_MANIFESTS_TABLE,
    "manifests_bucket": ENV_MANIFESTS_BUCKET,
    "payload_bucket": ENV_PAYLOAD_BUCKET,
    "schedule_group": ENV_SCHEDULE_GROUP,
    "scheduler_role_arn": ENV_SCHEDULER_ROLE_ARN,
    "drive_function_arn": ENV_DRIVE_FUNCTION_ARN,
    "dlq_arn": ENV_DLQ_ARN,
    "recurring_schedule_group": ENV_RECURRING_SCHEDULE_GROUP,
    "alarm_queue_url": ENV_ALARM_QUEUE_URL,
    "signing_secret": ENV_SIGNING_SECRET,
    "region": ENV_REGION,
    "checkpoint_table": ENV_CHECKPOINT_TABLE,
    "http_checkpoint_url": ENV_HTTP_CHECKPOINT_URL,
}


@functools.cache
def current_settings() -> Settings:
    """The process's settings, read from ``os.environ`` on first call and then cached.

    Tests that change the environment call ``current_settings.cache_clear()``.
    """
    return Settings.from_env(os.environ)


def read_overrun_grace_max_ms(env: Mapping[str, str] = os.environ) -> int:
    """``RELAYFLOW_OVERRUN_GRACE_MAX`` alone, for step hosts that read no other setting.

    Raises:
        ValidationError: The variable is not a duration (the message names it).
    """
    return _duration_ms(env, ENV_OVERRUN_GRACE_MAX, DEFAULT_OVERRUN_GRACE_MAX_MS)


def _raw(env: Mapping[str, str], name: str) -> str | None:
    value = env.get(name, "").strip()
    return value or None


_TRUE = ("true", "1", "yes", "on")
_FALSE = ("false", "0", "no", "off")


def _flag(env: Mapping[str, str], name: str) -> bool:
    raw = _raw(env, name)
    if raw is None or raw.lower() in _FALSE:
        return False
    if raw.lower() in _TRUE:
        return True
    raise ValidationError(f"{name} must be true or false, got {raw!r}")


def _positive_int(env: Mapping[str, str], name: str, default: int) -> int:
    value = _non_negative_int(env, name, default)
    if value == 0:
        raise ValidationError(f"{name} must be a positive integer, got 0")
    return value


def _non_negative_int(env: Mapping[str, str], name: str, default: int) -> int:
    raw = _raw(env, name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ValidationError(f"{name} must be an integer, got {raw!r}") from None
    if value < 0:
        raise ValidationError(f"{name} must not be negative, got {value}")
    return value


def _positive_float(env: Mapping[str, str], name: str, default: float) -> float:
    raw = _raw(env, name)
    if raw is None:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ValidationError(f"{name} must be a number of seconds, got {raw!r}") from None
    if not value > 0 or value == float("inf"):
        raise ValidationError(f"{name} must be a positive number of seconds, got {raw!r}")
    return value


def _duration_ms(env: Mapping[str, str], name: str, default: int) -> int:
    raw = _raw(env, name)
    if raw is None:
        return default
    match = _DURATION.match(raw)
    if match is None:
        raise ValidationError(
            f"{name} must be milliseconds or a duration like 10s, 2m, got {raw!r}"
        )
    return int(match.group(1)) * _UNIT_MS[match.group(2) or "ms"]


def _dispatch_map(raw: str | None) -> dict[str, DispatchTarget]:
    if raw is None:
        return {}
    try:
        parsed = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ValidationError(f"{ENV_DISPATCH_MAP} is not valid JSON: {exc.msg}") from None
    if not isinstance(parsed, dict):
        raise ValidationError(
            f"{ENV_DISPATCH_MAP} must be a JSON object of workflow id -> dispatcher"
        )
    return {
        str(key): DispatchTarget.parse(value, where=f"{ENV_DISPATCH_MAP}[{key!r}]")
        for key, value in parsed.items()
    }


def import_workflow_modules(env: Mapping[str, str] = os.environ) -> list[str]:
    """Import the modules named by ``RELAYFLOW_WORKFLOW_MODULES``; returns their names."""
    names = [n.strip() for n in (env.get(ENV_WORKFLOW_MODULES) or "").split(",") if n.strip()]
    for name in names:
        importlib.import_module(name)
    return names
