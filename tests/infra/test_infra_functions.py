"""The four functions: runtime, architecture, logging and the environment relayflow reads."""

from __future__ import annotations

import importlib
import json
from typing import Any

import pytest
from aws_cdk.assertions import Template
from infra_asserts import dead_letter_queue_id, functions_by_handler, resources

from relayflow import config
from relayflow.api import settings as api_settings
from relayflow.cdk.functions import FUNCTION_SPECS, FunctionSpec

pytestmark = pytest.mark.slow

ROOT_NAMES = {"api", "drive", "sweeper", "worker"}
KNOWN_NAMES = (
    set(config.ALL_ENV_NAMES)
    | {getattr(api_settings, n) for n in dir(api_settings) if n.startswith("ENV_")}
    | {config.ENV_WORKFLOW_MODULES}
)
ENGINE_NAMES = {
    config.ENV_TABLE_NAME,
    config.ENV_MANIFESTS_TABLE,
    config.ENV_MANIFESTS_BUCKET,
    config.ENV_PAYLOAD_BUCKET,
    config.ENV_SCHEDULE_GROUP,
    config.ENV_SCHEDULER_ROLE_ARN,
    config.ENV_DRIVE_FUNCTION_ARN,
    config.ENV_DLQ_ARN,
    config.ENV_RETENTION_DAYS,
    config.ENV_DISPATCHER,
}


def _env(function: dict[str, Any]) -> dict[str, Any]:
    variables: dict[str, Any] = function["Environment"]["Variables"]
    return variables


def test_there_is_one_function_per_role(any_template: Template) -> None:
    assert set(functions_by_handler(any_template)) == ROOT_NAMES


@pytest.mark.parametrize(
    ("template_name", "architecture", "memory"),
    [("sample", "arm64", 1024), ("variant", "x86_64", 512)],
)
def test_functions_run_python_3_12_on_the_chosen_architecture(
    request: pytest.FixtureRequest, template_name: str, architecture: str, memory: int
) -> None:
    template: Template = request.getfixturevalue(f"{template_name}_template")
    for name, function in functions_by_handler(template).items():
        assert function["Runtime"] == "python3.12"
        assert function["Architectures"] == [architecture]
        assert function["MemorySize"] == (256 if name == "sweeper" else memory)


def test_functions_log_json_to_their_own_group_with_retention(sample_template: Template) -> None:
    groups = resources(sample_template, "AWS::Logs::LogGroup")
    for function in functions_by_handler(sample_template).values():
        logging = function["LoggingConfig"]
        assert logging["LogFormat"] == "JSON"
        group_id = logging["LogGroup"]["Ref"]
        assert groups[group_id]["Properties"]["RetentionInDays"] == 7  # cdk.json dev stage


def test_every_relayflow_variable_is_a_name_the_package_reads(any_template: Template) -> None:
    for name, function in functions_by_handler(any_template).items():
        ours = {k for k in _env(function) if k.startswith("RELAYFLOW_")}
        assert ours <= KNOWN_NAMES, f"{name}: unknown variables {ours - KNOWN_NAMES}"


def test_functions_that_drive_runs_get_the_whole_engine_configuration(
    any_template: Template,
) -> None:
    functions = functions_by_handler(any_template)
    for name in ("api", "drive", "sweeper"):
        assert set(_env(functions[name])) >= ENGINE_NAMES, name
    # The worker only hosts workflow bodies: it imports them, resolves payload pointers and
    # appends per-step checkpoints to the runs table.
    worker_env = _env(functions["worker"])
    assert {k for k in worker_env if k.startswith("RELAYFLOW_")} == {
        config.ENV_PAYLOAD_BUCKET,
        config.ENV_WORKFLOW_MODULES,
        config.ENV_CHECKPOINT_TABLE,
    }
    assert worker_env[config.ENV_WORKFLOW_MODULES] == "examples"


def test_alarms_target_the_drive_functions_alias_by_its_fixed_name(
    any_template: Template,
) -> None:
    functions = functions_by_handler(any_template)
    drive_name = functions["drive"]["FunctionName"]
    arn = _env(functions["api"])[config.ENV_DRIVE_FUNCTION_ARN]
    assert arn["Fn::Join"][1][-1] == f":function:{drive_name}:live"
    assert len(drive_name) <= 64


def test_sample_hosts_the_examples_inline(sample_template: Template) -> None:
    env = _env(functions_by_handler(sample_template)["drive"])
    assert env[config.ENV_DISPATCHER] == "inline"
    assert env[config.ENV_WORKFLOW_MODULES] == "examples"
    assert config.ENV_DISPATCH_MAP not in env


def test_step_hosts_become_the_dispatch_map(variant_template: Template, variant_stack: Any) -> None:
    env = _env(functions_by_handler(variant_template)["drive"])
    assert env[config.ENV_DISPATCHER] == "inline"
    resolved = variant_stack.resolve(env[config.ENV_DISPATCH_MAP])
    # The map is a JSON object rendered by CloudFormation; check its literal parts.
    rendered = json.dumps(resolved)
    assert "billing.charge" in rendered and "lambda:arn:aws:lambda:" in rendered
    assert "ext.hook" in rendered and "http:https://steps.example.com/relayflow" in rendered
    assert "orders.fulfil" in rendered
    assert env[config.ENV_SIGNING_MODE] == "relayflow"
    assert "resolve:secretsmanager" in json.dumps(env[config.ENV_SIGNING_SECRET])


def test_http_checkpoints_name_the_api_for_the_dispatchers_and_the_route(
    sample_template: Template, variant_template: Template, variant_stack: Any
) -> None:
    assert config.ENV_HTTP_CHECKPOINT_URL not in _env(
        functions_by_handler(sample_template)["drive"]
    )
    functions = functions_by_handler(variant_template)
    for name in ("api", "drive", "sweeper"):
        url = json.dumps(
            variant_stack.resolve(_env(functions[name])[config.ENV_HTTP_CHECKPOINT_URL])
        )
        assert "execute-api" in url, name


def test_api_function_carries_the_auth_settings(
    sample_template: Template, variant_template: Template
) -> None:
    bearer = _env(functions_by_handler(sample_template)["api"])
    assert bearer[api_settings.ENV_API_AUTH] == "bearer"
    assert "Ref" in bearer[api_settings.ENV_API_TOKENS_SECRET]
    iam = _env(functions_by_handler(variant_template)["api"])
    assert iam[api_settings.ENV_API_AUTH] == "iam"
    assert api_settings.ENV_API_TOKENS_SECRET not in iam
    assert iam[api_settings.ENV_API_CORS_ORIGINS] == "https://app.example.com"


def test_failed_async_invocations_land_in_the_dead_letter_queue(any_template: Template) -> None:
    configs = resources(any_template, "AWS::Lambda::EventInvokeConfig")
    # Drive and sweeper, the functions invoked asynchronously: unqualified, their `live`
    # alias, and the version published (kept with it, for runs pinned to it).
    assert len(configs) == 6
    dlq = dead_letter_queue_id(any_template)
    for invoke_config in configs.values():
        props = invoke_config["Properties"]
        assert props["MaximumRetryAttempts"] == 2
        assert props["DestinationConfig"]["OnFailure"]["Destination"] == {
            "Fn::GetAtt": [dlq, "Arn"]
        }


@pytest.mark.parametrize("spec", FUNCTION_SPECS, ids=lambda spec: spec.name)
def test_each_handler_is_a_callable_of_the_package(spec: FunctionSpec) -> None:
    module_name, _, attribute = spec.handler.rpartition(".")
    assert module_name.startswith("relayflow.")
    assert callable(getattr(importlib.import_module(module_name), attribute))
