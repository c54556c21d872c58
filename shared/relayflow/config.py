"""Deployment settings read from the environment, and the ``ENV_*`` names infrastructure sets.

Each setting is declared once, as a field of :class:`Settings` naming its variable, default,
parser and meaning (:func:`relayflow.settings.setting`); the variable list, the reading, the
error messages and the docs table (:func:`settings_table`) derive from those declarations.
Nothing is read at import: call :meth:`Settings.from_env` (or :func:`current_settings`, which
caches it) when a value is first needed.

``python -m relayflow.settings --write-docs docs/reference/settings.md`` rewrites the docs table.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import importlib
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, cast

from relayflow.errors import ValidationError
from relayflow.settings.declare import (
    Variable,
    read_field,
    read_fields,
    render_table,
    rewrite_marked_table,
    setting,
    specs,
)
from relayflow.settings.parsers import (
    DISPATCHER_KINDS,
    DispatcherKind,
    DispatchTarget,
    default_dispatcher,
    dispatcher_map,
    duration_ms,
    flag,
    names,
    non_negative_int,
    one_of,
    positive_int,
    positive_seconds,
    price_table,
    text,
)

if TYPE_CHECKING:
    from relayflow.core.settings import CoreSettings
    from relayflow.costs.prices import PriceTable
    from relayflow.settings.parsers import Parser

__all__ = [
    "ALL_ENV_NAMES",
    "DISPATCHER_KINDS",
    "SIGNING_MODES",
    "WORKFLOW_MODULES",
    "DispatchTarget",
    "DispatcherKind",
    "Settings",
    "SigningMode",
    "current_settings",
    "import_workflow_modules",
    "read_group_checkpoints",
    "read_overrun_grace_max_ms",
    "settings_table",
]

SigningMode = Literal["relayflow", "voyant"]
SIGNING_MODES: tuple[str, ...] = ("relayflow", "voyant")

_DISPATCH_FUNCTION = Variable(
    "RELAYFLOW_DISPATCH_FUNCTION", "Function name or ARN when the dispatcher is `lambda`"
)
_DISPATCH_URL = Variable("RELAYFLOW_DISPATCH_URL", "Endpoint when the dispatcher is `http`")
#: Read by :func:`import_workflow_modules`, not by :class:`Settings`.
WORKFLOW_MODULES = Variable(
    "RELAYFLOW_WORKFLOW_MODULES",
    "Comma-separated modules imported before a function serves, so that the workflows they "
    "define (and their `trigger_on` filters) are registered",
)


@dataclass(frozen=True)
class Settings:
    """Everything a deployment configures through environment variables.

    Each field is declared with its variable, default, parser and meaning; the settings
    table (:func:`settings_table`, published in the docs) lists them. Resource names are
    ``None`` when unset; adapters that need one call :meth:`require`.
    """

    table_name: str | None = setting("RELAYFLOW_TABLE_NAME", None, text, "DynamoDB table of runs")
    manifests_table: str | None = setting(
        "RELAYFLOW_MANIFESTS_TABLE", None, text, "DynamoDB table of manifests"
    )
    manifests_bucket: str | None = setting(
        "RELAYFLOW_MANIFESTS_BUCKET",
        None,
        text,
        "S3 bucket for manifests too large for an item (~350 KB)",
    )
    payload_bucket: str | None = setting(
        "RELAYFLOW_PAYLOAD_BUCKET", None, text, "S3 bucket for values over the inline cap"
    )
    schedule_group: str | None = setting(
        "RELAYFLOW_SCHEDULE_GROUP", None, text, "EventBridge Scheduler group holding the run alarms"
    )
    scheduler_role_arn: str | None = setting(
        "RELAYFLOW_SCHEDULER_ROLE_ARN",
        None,
        text,
        "Role Scheduler assumes to invoke the drive function",
    )
    drive_function_arn: str | None = setting(
        "RELAYFLOW_DRIVE_FUNCTION_ARN",
        None,
        text,
        'Drive Lambda that alarms and hand-offs invoke with `{"runId", "wakeAt"}` (the CDK '
        "construct names its `live` alias, so that they reach the version deployed last)",
    )
    trace_viewer_url: str | None = setting(
        "RELAYFLOW_TRACE_VIEWER_URL",
        None,
        text,
        "Link to a run's trace in your trace viewer, `{traceId}` standing for its trace id "
        "(`{xrayTraceId}`: in X-Ray's notation); the API's `traceUrl` and the dashboard's "
        "trace link (unset: no link)",
    )
    dlq_arn: str | None = setting(
        "RELAYFLOW_DLQ_ARN", None, text, "SQS queue for alarms Scheduler could not deliver"
    )
    recurring_schedule_group: str | None = setting(
        "RELAYFLOW_RECURRING_SCHEDULE_GROUP",
        None,
        text,
        "Scheduler group of the workflows' recurring schedules (unset: not hosted)",
    )
    alarm_queue_url: str | None = setting(
        "RELAYFLOW_ALARM_QUEUE_URL",
        None,
        text,
        "SQS queue for wake-ups less than 15 minutes ahead (unset: Scheduler only)",
    )
    signing_secret: str | None = setting(
        "RELAYFLOW_SIGNING_SECRET",
        None,
        text,
        "Shared secret signing step requests",
        shown="unset (unsigned)",
    )
    signing_mode: SigningMode = setting(
        "RELAYFLOW_SIGNING_MODE",
        "relayflow",
        cast("Parser[SigningMode]", one_of(*SIGNING_MODES)),
        "`relayflow` (timestamped, hex) or `voyant` (reference-compatible)",
    )
    inline_drive_budget_ms: int = setting(
        "RELAYFLOW_INLINE_DRIVE_BUDGET",
        10_000,
        duration_ms,
        "How long an API request drives (in process) or waits for (deployed) its run "
        "(ms, or `10s`, `2m`)",
    )
    drive_budget_ms: int = setting(
        "RELAYFLOW_DRIVE_BUDGET",
        840_000,
        duration_ms,
        "How long one call of the drive function drives before handing the run on",
    )
    sweep_budget_ms: int = setting(
        "RELAYFLOW_SWEEP_BUDGET",
        240_000,
        duration_ms,
        "How long one call of the sweeper drives; due runs left over are handed to the "
        "drive function",
    )
    lambda_margin_ms: int = setting(
        "RELAYFLOW_LAMBDA_MARGIN",
        3_000,
        duration_ms,
        "Every budget is capped by the function's remaining time less this",
    )
    invocation_timeout_ms: int = setting(
        "RELAYFLOW_INVOCATION_TIMEOUT",
        600_000,
        duration_ms,
        "Longest step request `deadline`; a drive's budget shortens it",
    )
    lease_ms: int = setting(
        "RELAYFLOW_LEASE",
        60_000,
        duration_ms,
        "How long a holder's lease on a run lasts unrenewed; renewed every third of it while "
        "an invocation is in flight, so a run whose holder died is free again this long after "
        "the crash at most",
    )
    lease_grace_ms: int = setting(
        "RELAYFLOW_LEASE_GRACE",
        5_000,
        duration_ms,
        "Time between a request's deadline and the latest end of its lease, for saving the answer",
    )
    child_recheck_ms: int = setting(
        "RELAYFLOW_CHILD_RECHECK",
        900_000,
        duration_ms,
        "How often a parent waiting on attached children checks them",
    )
    operations_limit: int = setting(
        "RELAYFLOW_OPERATIONS_LIMIT",
        100_000,
        positive_int,
        "Operations (invocations, attempts, wait resolutions) a run may use before it fails "
        "with `operations_limit_exceeded`",
    )
    inbox_limit: int = setting(
        "RELAYFLOW_INBOX_LIMIT",
        1_000,
        positive_int,
        "Early deliveries buffered per run; more answer 409 `inbox_full`",
    )
    recent_delivery_ids: int = setting(
        "RELAYFLOW_RECENT_DELIVERY_IDS",
        100,
        positive_int,
        "Delivery ids also kept on the run's header (closes the window between claiming an "
        "id and delivering it)",
    )
    delivery_id_memory_ms: int = setting(
        "RELAYFLOW_DELIVERY_ID_MEMORY",
        365 * 86_400_000,
        duration_ms,
        "How long `Idempotency-Key` answers are kept (plus the retention); a run's delivery "
        "ids are kept for its whole life plus the retention",
    )
    dispatch_max_attempts: int = setting(
        "RELAYFLOW_DISPATCH_MAX_ATTEMPTS",
        5,
        positive_int,
        "Attempts of one invocation against an unreachable or failing host before the run "
        "fails with `handler_error`",
    )
    dispatch_backoff_ms: int = setting(
        "RELAYFLOW_DISPATCH_BACKOFF",
        1_000,
        duration_ms,
        "Delay after the first transient dispatch failure (doubles each time)",
    )
    dispatch_backoff_max_ms: int = setting(
        "RELAYFLOW_DISPATCH_BACKOFF_MAX", 60_000, duration_ms, "Cap of that delay"
    )
    version_retry_max_ms: int = setting(
        "RELAYFLOW_VERSION_RETRY_MAX",
        900_000,
        duration_ms,
        "Longest delay between tries of a run waiting for the code version it is pinned to",
    )
    inline_payload_cap: int = setting(
        "RELAYFLOW_INLINE_PAYLOAD_CAP",
        32 * 1024,
        positive_int,
        "Values whose JSON is larger (bytes) move to the payload bucket",
    )
    deployment_name: str | None = setting(
        "RELAYFLOW_DEPLOYMENT_NAME",
        None,
        text,
        "The deployment's name (the CDK construct's `environment_name`): the `environment` "
        "dimension of every metric the functions emit (unset: no such dimension)",
    )
    retention_days: int = setting(
        "RELAYFLOW_RETENTION_DAYS",
        30,
        positive_int,
        "Finished runs expire (DynamoDB TTL) this many days after they end",
    )
    versioned_functions: tuple[str, ...] = setting(
        "RELAYFLOW_VERSIONED_FUNCTIONS",
        (),
        names,
        "Sweeper: comma-separated Lambda functions whose published versions it deletes once "
        "no run is pinned to them (unset: none)",
    )
    version_retention_days: int = setting(
        "RELAYFLOW_VERSION_RETENTION_DAYS",
        14,
        positive_int,
        "A published Lambda version no alias points to is deleted once no run pinned to it "
        "has lived for this many days (nor was it published in them)",
    )
    manifest_keep: int = setting(
        "RELAYFLOW_MANIFEST_KEEP",
        3,
        positive_int,
        "Manifest versions kept per environment (the current one always is)",
    )
    dispatcher: DispatchTarget = setting(
        "RELAYFLOW_DISPATCHER",
        DispatchTarget("inline"),
        default_dispatcher(_DISPATCH_FUNCTION.name, _DISPATCH_URL.name),
        "Default step host: `inline`, `lambda` or `http`",
        companions=(_DISPATCH_FUNCTION, _DISPATCH_URL),
    )
    dispatch_map: Mapping[str, DispatchTarget] = setting(
        "RELAYFLOW_DISPATCH_MAP",
        cast("Mapping[str, DispatchTarget]", {}),
        dispatcher_map,
        'JSON object: workflow id or `tenantScript` → `"inline"`, `"lambda:<function>"`, '
        '`"http:<url>"` (or `{"kind", "target"}`)',
    )
    connect_timeout_s: float = setting(
        "RELAYFLOW_DISPATCH_CONNECT_TIMEOUT",
        3.05,
        positive_seconds,
        "HTTP dispatch connect timeout (s)",
    )
    read_timeout_s: float = setting(
        "RELAYFLOW_DISPATCH_READ_TIMEOUT",
        2.0,
        positive_seconds,
        "Seconds an HTTP host may answer after the request's deadline: the read timeout is "
        "the time to the deadline plus this",
    )
    dispatch_retries: int = setting(
        "RELAYFLOW_DISPATCH_RETRIES",
        2,
        non_negative_int,
        "Extra attempts after a transient dispatch failure (connect timeouts, 429, 5xx, "
        "unreachable); a request whose answer timed out is never re-sent by the dispatcher",
    )
    checkpoint_table: str | None = setting(
        "RELAYFLOW_CHECKPOINT_TABLE",
        None,
        text,
        "Step host functions: the runs table, into which the host writes per-step "
        "checkpoints and reserves its steps' rate limits; unset, the host is durable per "
        "invocation and a rate-limited step raises `RATE_LIMITER_MISSING`",
    )
    http_checkpoint_url: str | None = setting(
        "RELAYFLOW_HTTP_CHECKPOINT_URL",
        None,
        text,
        "The API's base URL as HTTP step hosts reach it: set, HTTP hosts checkpoint each step "
        "through `POST /api/runs/{id}/checkpoints` (needs `RELAYFLOW_SIGNING_SECRET`); unset, "
        "they are durable per invocation",
        shown="— (off)",
    )
    require_per_step_durability: bool = setting(
        "RELAYFLOW_REQUIRE_PER_STEP_DURABILITY",
        False,
        flag,
        "`true` refuses per-invocation durability: a run whose step host cannot checkpoint "
        "each step fails with `durability_unavailable` instead",
    )
    overrun_grace_max_ms: int = setting(
        "RELAYFLOW_OVERRUN_GRACE_MAX",
        300_000,
        duration_ms,
        "Step hosts: the longest a step's next attempt waits for the code of an attempt given "
        "up at its timeout that still runs in the same process (the grace is twice the "
        "step's timeout, capped by this); past it the step fails with `STEP_STILL_RUNNING`",
    )
    group_checkpoints: bool = setting(
        "RELAYFLOW_GROUP_CHECKPOINTS",
        True,
        flag,
        "Step hosts: checkpoint entries that become ready while a checkpoint write is in "
        "flight (map items, parallel branches, gathered steps) share the next write; `false` "
        "writes each entry on its own before its branch goes on",
    )
    price_table: PriceTable | None = setting(
        "RELAYFLOW_PRICE_TABLE",
        None,
        price_table,
        "Prices a run's cost is shown at: a JSON object of price table fields (the others "
        "keep their list prices) or the path of a JSON file holding one "
        "(see [Costs](../operations/costs.md))",
        shown="AWS list prices, us-east-1",
    )
    region: str | None = setting(
        "RELAYFLOW_REGION",
        None,
        text,
        "AWS region",
        shown="`AWS_REGION` / `AWS_DEFAULT_REGION`",
        fallbacks=("AWS_REGION", "AWS_DEFAULT_REGION"),
    )

    @classmethod
    def from_env(cls, env: Mapping[str, str] = os.environ) -> Settings:
        """Read the settings from ``env`` (the process environment by default).

        Raises:
            ValidationError: A variable is set to a value that cannot be used; the message
                names the variable.
        """
        return cls(**read_fields(cls, env))

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
            version_retry_max_ms=self.version_retry_max_ms,
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
            spec = specs(Settings).get(name)
            variable = spec.variable if spec is not None else name
            raise ValidationError(f"setting {name} is not configured: set {variable}")
        return value

    def dispatch_target_for(
        self, workflow_id: str, tenant_script: str | None = None
    ) -> DispatchTarget:
        """The dispatcher of a run: its ``tenantScript``, then its workflow id, then the default."""
        if tenant_script and tenant_script in self.dispatch_map:
            return self.dispatch_map[tenant_script]
        return self.dispatch_map.get(workflow_id, self.dispatcher)


#: Every variable :meth:`Settings.from_env` reads (besides the region's AWS fallbacks).
ALL_ENV_NAMES: tuple[str, ...] = tuple(
    row.name for spec in specs(Settings).values() for row in spec.rows()
)
#: ``ENV_<NAME>`` → ``RELAYFLOW_<NAME>`` for every variable (the names infrastructure sets).
_ENV_CONSTANTS: dict[str, str] = {
    "ENV_" + name.removeprefix("RELAYFLOW_"): name
    for name in (*ALL_ENV_NAMES, WORKFLOW_MODULES.name)
}


def __getattr__(name: str) -> str:
    """``ENV_TABLE_NAME`` and the like: each variable's name, derived from its declaration."""
    try:
        return _ENV_CONSTANTS[name]
    except KeyError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None


def __dir__() -> list[str]:
    return sorted([*globals(), *_ENV_CONSTANTS])


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
    value = read_field(specs(Settings)["overrun_grace_max_ms"], env)
    return Settings.overrun_grace_max_ms if value is dataclasses.MISSING else int(value)


def read_group_checkpoints(env: Mapping[str, str] = os.environ) -> bool:
    """``RELAYFLOW_GROUP_CHECKPOINTS`` alone, for step hosts that read no other setting.

    Raises:
        ValidationError: The variable is not a boolean (the message names it).
    """
    value = read_field(specs(Settings)["group_checkpoints"], env)
    return Settings.group_checkpoints if value is dataclasses.MISSING else bool(value)


def import_workflow_modules(env: Mapping[str, str] = os.environ) -> list[str]:
    """Import the modules named by ``RELAYFLOW_WORKFLOW_MODULES``; returns their names."""
    raw = env.get(WORKFLOW_MODULES.name) or ""
    names = [n.strip() for n in raw.split(",") if n.strip()]
    for name in names:
        importlib.import_module(name)
    return names


def settings_table() -> str:
    """The Markdown table of every variable: name, default and meaning (the docs' table)."""
    rows = [row for spec in specs(Settings).values() for row in spec.rows()]
    return render_table([*rows, WORKFLOW_MODULES])


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m relayflow.settings``: print the settings table, or rewrite a docs page's."""
    parser = argparse.ArgumentParser(prog="python -m relayflow.settings", description=main.__doc__)
    parser.add_argument(
        "--write-docs",
        type=Path,
        metavar="PAGE",
        help="rewrite the table between the settings-table markers of PAGE",
    )
    args = parser.parse_args(argv)
    if args.write_docs is None:
        print(settings_table(), end="")
    elif rewrite_marked_table(args.write_docs, settings_table()):
        print(f"rewrote the settings table in {args.write_docs}")
    return 0
