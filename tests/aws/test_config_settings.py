"""Settings come from environment variables, with defaults, and refuse unusable values."""

from __future__ import annotations

from pathlib import Path

import pytest

from relayflow import config
from relayflow.config import DispatchTarget, Settings
from relayflow.core.settings import CoreSettings
from relayflow.costs import PriceTable
from relayflow.errors import ValidationError


def test_defaults_when_nothing_is_set() -> None:
    settings = Settings.from_env({})
    assert settings.inline_drive_budget_ms == 10_000
    assert settings.inline_payload_cap == 32 * 1024
    assert settings.retention_days == 30
    assert settings.manifest_keep == 3
    assert settings.dispatcher == DispatchTarget("inline")
    assert settings.dispatch_map == {}
    assert settings.signing_secret is None
    assert settings.signing_mode == "relayflow"
    assert settings.table_name is None
    assert settings.region is None
    assert settings.overrun_grace_max_ms == 300_000


def test_every_variable_is_read() -> None:
    env = {
        config.ENV_TABLE_NAME: "runs",
        config.ENV_MANIFESTS_TABLE: "manifests",
        config.ENV_MANIFESTS_BUCKET: "manifest-bucket",
        config.ENV_PAYLOAD_BUCKET: "payloads",
        config.ENV_SCHEDULE_GROUP: "relayflow",
        config.ENV_SCHEDULER_ROLE_ARN: "arn:aws:iam::123456789012:role/sched",
        config.ENV_DRIVE_FUNCTION_ARN: "arn:aws:lambda:eu-west-1:123456789012:function:drive",
        config.ENV_DLQ_ARN: "arn:aws:sqs:eu-west-1:123456789012:dlq",
        config.ENV_SIGNING_SECRET: "s3cret",
        config.ENV_SIGNING_MODE: "voyant",
        config.ENV_INLINE_DRIVE_BUDGET: "2s",
        config.ENV_INLINE_PAYLOAD_CAP: "1024",
        config.ENV_RETENTION_DAYS: "7",
        config.ENV_MANIFEST_KEEP: "5",
        config.ENV_DISPATCHER: "http",
        config.ENV_DISPATCH_URL: "https://host.example/step",
        config.ENV_DISPATCH_MAP: '{"billing.*": "lambda:billing-host", "x": {"kind": "inline"}}',
        config.ENV_DISPATCH_CONNECT_TIMEOUT: "1.5",
        config.ENV_DISPATCH_READ_TIMEOUT: "20",
        config.ENV_DISPATCH_RETRIES: "0",
        config.ENV_REGION: "us-east-2",
        config.ENV_RECURRING_SCHEDULE_GROUP: "relayflow-schedules",
        config.ENV_ALARM_QUEUE_URL: "https://sqs.us-east-2.amazonaws.com/123456789012/alarms",
        config.ENV_DRIVE_BUDGET: "5m",
        config.ENV_SWEEP_BUDGET: "1m",
        config.ENV_LAMBDA_MARGIN: "4s",
        config.ENV_INVOCATION_TIMEOUT: "4m",
        config.ENV_LEASE: "6m",
        config.ENV_LEASE_GRACE: "10s",
        config.ENV_CHILD_RECHECK: "1h",
        config.ENV_OPERATIONS_LIMIT: "500",
        config.ENV_INBOX_LIMIT: "20",
        config.ENV_RECENT_DELIVERY_IDS: "8",
        config.ENV_DELIVERY_ID_MEMORY: "30d",
        config.ENV_DISPATCH_MAX_ATTEMPTS: "3",
        config.ENV_DISPATCH_BACKOFF: "2s",
        config.ENV_DISPATCH_BACKOFF_MAX: "1m",
        config.ENV_CHECKPOINT_TABLE: "runs",
        config.ENV_HTTP_CHECKPOINT_URL: "https://api.example",
        config.ENV_REQUIRE_PER_STEP_DURABILITY: "true",
        config.ENV_OVERRUN_GRACE_MAX: "90s",
        config.ENV_VERSIONED_FUNCTIONS: "stack-api, stack-drive,stack-api",
        config.ENV_VERSION_RETENTION_DAYS: "3",
        config.ENV_VERSION_RETRY_MAX: "10m",
        config.ENV_GROUP_CHECKPOINTS: "false",
        config.ENV_DEPLOYMENT_NAME: "prod",
        config.ENV_PRICE_TABLE: '{"dynamodbWriteUnit": 0.000001}',
        "RELAYFLOW_TRACE_VIEWER_URL": "https://traces.example/{traceId}",
    }
    settings = Settings.from_env(env)
    assert settings.table_name == "runs"
    assert settings.manifests_table == "manifests"
    assert settings.manifests_bucket == "manifest-bucket"
    assert settings.payload_bucket == "payloads"
    assert settings.schedule_group == "relayflow"
    assert settings.scheduler_role_arn.endswith(":role/sched")  # type: ignore[union-attr]
    assert settings.drive_function_arn.endswith(":function:drive")  # type: ignore[union-attr]
    assert settings.dlq_arn.endswith(":dlq")  # type: ignore[union-attr]
    assert settings.signing_secret == "s3cret"
    assert settings.signing_mode == "voyant"
    assert settings.inline_drive_budget_ms == 2_000
    assert settings.inline_payload_cap == 1024
    assert settings.retention_days == 7
    assert settings.manifest_keep == 5
    assert settings.dispatcher == DispatchTarget("http", "https://host.example/step")
    assert settings.dispatch_map == {
        "billing.*": DispatchTarget("lambda", "billing-host"),
        "x": DispatchTarget("inline"),
    }
    assert settings.connect_timeout_s == 1.5
    assert settings.read_timeout_s == 20.0
    assert settings.dispatch_retries == 0
    assert settings.region == "us-east-2"
    assert settings.recurring_schedule_group == "relayflow-schedules"
    assert settings.alarm_queue_url == env[config.ENV_ALARM_QUEUE_URL]
    assert settings.checkpoint_table == "runs"
    assert settings.http_checkpoint_url == "https://api.example"
    assert settings.require_per_step_durability is True
    assert settings.group_checkpoints is False
    assert settings.deployment_name == "prod"
    assert settings.price_table is not None
    assert settings.price_table.dynamodb_write_unit == 0.000001
    assert settings.trace_viewer_url == "https://traces.example/{traceId}"
    assert set(config.ALL_ENV_NAMES) == set(env) | {config.ENV_DISPATCH_FUNCTION}
    assert settings.core_settings() == CoreSettings(
        operations_limit=500,
        inbox_limit=20,
        seen_ids_limit=8,
        dispatch_max_attempts=3,
        dispatch_backoff_initial_ms=2_000,
        dispatch_backoff_max_ms=60_000,
        version_retry_max_ms=600_000,
        invocation_timeout_ms=240_000,
        lease_ms=360_000,
        lease_grace_ms=10_000,
        drive_budget_ms=300_000,
        child_reconcile_ms=3_600_000,
        require_per_step=True,
    )
    assert (settings.sweep_budget_ms, settings.lambda_margin_ms) == (60_000, 4_000)
    assert settings.delivery_id_memory_ms == 30 * 86_400_000
    assert settings.overrun_grace_max_ms == 90_000
    assert settings.versioned_functions == ("stack-api", "stack-drive")
    assert settings.version_retention_days == 3
    assert settings.version_retry_max_ms == 600_000


def test_a_budget_is_capped_by_the_lambdas_remaining_time_less_the_margin() -> None:
    class Context:
        def __init__(self, remaining: int) -> None:
            self.remaining = remaining

        def get_remaining_time_in_millis(self) -> int:
            return self.remaining

    settings = Settings(lambda_margin_ms=3_000)
    assert settings.budget_ms(840_000, Context(900_000)) == 840_000
    assert settings.budget_ms(840_000, Context(60_000)) == 57_000
    assert settings.budget_ms(10_000, Context(1_000)) == 0
    assert settings.budget_ms(10_000, None) == 10_000


@pytest.mark.parametrize(
    ("env", "region"),
    [
        ({"AWS_DEFAULT_REGION": "eu-west-1"}, "eu-west-1"),
        ({"AWS_DEFAULT_REGION": "eu-west-1", "AWS_REGION": "eu-central-1"}, "eu-central-1"),
        ({"AWS_REGION": "eu-central-1", config.ENV_REGION: "ap-south-1"}, "ap-south-1"),
    ],
)
def test_region_falls_back_to_the_aws_variables(env: dict[str, str], region: str) -> None:
    assert Settings.from_env(env).region == region


@pytest.mark.parametrize(
    ("raw", "ms"), [("2500", 2500), ("3s", 3000), ("1m", 60_000), ("750ms", 750)]
)
def test_inline_drive_budget_accepts_milliseconds_and_durations(raw: str, ms: int) -> None:
    assert Settings.from_env({config.ENV_INLINE_DRIVE_BUDGET: raw}).inline_drive_budget_ms == ms


@pytest.mark.parametrize(
    ("env", "names"),
    [
        ({config.ENV_RETENTION_DAYS: "soon"}, config.ENV_RETENTION_DAYS),
        ({config.ENV_RETENTION_DAYS: "0"}, config.ENV_RETENTION_DAYS),
        ({config.ENV_INLINE_PAYLOAD_CAP: "-1"}, config.ENV_INLINE_PAYLOAD_CAP),
        ({config.ENV_INLINE_DRIVE_BUDGET: "ten seconds"}, config.ENV_INLINE_DRIVE_BUDGET),
        ({config.ENV_DISPATCH_READ_TIMEOUT: "0"}, config.ENV_DISPATCH_READ_TIMEOUT),
        ({config.ENV_DISPATCHER: "carrier-pigeon"}, config.ENV_DISPATCHER),
        ({config.ENV_DISPATCHER: "lambda"}, config.ENV_DISPATCH_FUNCTION),
        ({config.ENV_DISPATCHER: "http"}, config.ENV_DISPATCH_URL),
        ({config.ENV_SIGNING_MODE: "md5"}, config.ENV_SIGNING_MODE),
        ({config.ENV_DISPATCH_MAP: "{not json"}, config.ENV_DISPATCH_MAP),
        ({config.ENV_DISPATCH_MAP: "[1]"}, config.ENV_DISPATCH_MAP),
        ({config.ENV_DISPATCH_MAP: '{"w": "ftp:x"}'}, config.ENV_DISPATCH_MAP),
        ({config.ENV_DISPATCH_MAP: '{"w": "http:"}'}, config.ENV_DISPATCH_MAP),
        ({config.ENV_DISPATCH_MAP: '{"w": 3}'}, config.ENV_DISPATCH_MAP),
        (
            {config.ENV_REQUIRE_PER_STEP_DURABILITY: "sometimes"},
            config.ENV_REQUIRE_PER_STEP_DURABILITY,
        ),
        ({config.ENV_OVERRUN_GRACE_MAX: "a while"}, config.ENV_OVERRUN_GRACE_MAX),
    ],
)
def test_unusable_values_are_refused_naming_the_variable(env: dict[str, str], names: str) -> None:
    with pytest.raises(ValidationError, match=names):
        Settings.from_env(env)


def test_step_hosts_cap_the_grace_of_a_timed_out_attempt_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from relayflow.worker import ExecutorOptions

    assert ExecutorOptions().overrun_grace_max_ms == 300_000
    monkeypatch.setenv(config.ENV_OVERRUN_GRACE_MAX, "2m")
    assert ExecutorOptions().overrun_grace_max_ms == 120_000
    assert ExecutorOptions(overrun_grace_max_ms=5).overrun_grace_max_ms == 5
    monkeypatch.setenv(config.ENV_OVERRUN_GRACE_MAX, "soon")
    with pytest.raises(ValidationError, match=config.ENV_OVERRUN_GRACE_MAX):
        ExecutorOptions()


def test_require_names_the_missing_variable() -> None:
    settings = Settings.from_env({config.ENV_TABLE_NAME: "runs"})
    assert settings.require("table_name") == "runs"
    with pytest.raises(ValidationError, match=config.ENV_PAYLOAD_BUCKET):
        settings.require("payload_bucket")


def test_dispatch_target_prefers_tenant_script_then_workflow_then_default() -> None:
    settings = Settings.from_env(
        {
            config.ENV_DISPATCHER: "lambda",
            config.ENV_DISPATCH_FUNCTION: "default-host",
            config.ENV_DISPATCH_MAP: '{"tenant-a": "http:https://a.example", "wf": "inline"}',
        }
    )
    assert settings.dispatch_target_for("wf", "tenant-a") == DispatchTarget(
        "http", "https://a.example"
    )
    assert settings.dispatch_target_for("wf", "unknown") == DispatchTarget("inline")
    assert settings.dispatch_target_for("other") == DispatchTarget("lambda", "default-host")


def test_nothing_is_read_at_import_and_current_settings_is_cached(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    config.current_settings.cache_clear()
    monkeypatch.setenv(config.ENV_TABLE_NAME, "first")
    first = config.current_settings()
    monkeypatch.setenv(config.ENV_TABLE_NAME, "second")
    assert config.current_settings() is first
    config.current_settings.cache_clear()
    assert config.current_settings().table_name == "second"
    config.current_settings.cache_clear()


def test_settings_are_frozen() -> None:
    settings = Settings.from_env({})
    with pytest.raises(AttributeError):
        settings.table_name = "x"  # type: ignore[misc]


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("{not json", "not valid JSON"),
        ('{"dynamodbWriteUnit": -1}', "dynamodbWriteUnit"),
        ('{"lambdaPerRequest": 1}', "lambdaPerRequest"),
        ("/no/such/prices.json", "neither a JSON object nor a readable file"),
    ],
)
def test_an_unusable_price_table_is_refused_at_start(value: str, says: str) -> None:
    with pytest.raises(ValidationError, match=config.ENV_PRICE_TABLE) as refused:
        Settings.from_env({config.ENV_PRICE_TABLE: value})
    assert says in str(refused.value)


def test_the_price_table_may_be_a_json_file(tmp_path: Path) -> None:
    prices = tmp_path / "prices.json"
    prices.write_text('{"lambda_request": 0.0000003, "sqsRequest": 0}', encoding="utf-8")

    table = Settings.from_env({config.ENV_PRICE_TABLE: str(prices)}).price_table

    assert table is not None
    assert (table.lambda_request, table.sqs_request) == (0.0000003, 0)
    assert table.dynamodb_write_unit == PriceTable().dynamodb_write_unit
