"""Safe deploys: every deploy publishes a version of each function behind the alias `live`,
keeps the old versions (runs pinned to them still invoke them), and everything that invokes a
function goes through the alias; the sweeper may delete versions, never a function."""

from __future__ import annotations

import json
from typing import Any

import pytest
from aws_cdk.assertions import Template
from infra_asserts import (
    alias_of_function,
    as_list,
    functions_by_handler,
    logical_id_of_function,
    resources,
    role_statements,
)

from relayflow import config

pytestmark = pytest.mark.slow

NAMES = ("api", "drive", "sweeper", "worker")


def _role_of(template: Template, function: str) -> str:
    role: str = functions_by_handler(template)[function]["Role"]["Fn::GetAtt"][0]
    return role


def _statements(template: Template, function: str, action: str) -> list[dict[str, Any]]:
    return [
        s
        for s in role_statements(template, _role_of(template, function))
        if action in as_list(s["Action"])
    ]


@pytest.mark.parametrize("name", NAMES)
def test_each_deploy_publishes_a_retained_version_behind_the_live_alias(
    any_template: Template, name: str
) -> None:
    function = logical_id_of_function(any_template, name)
    (version_id, version) = next(
        (logical_id, v)
        for logical_id, v in resources(any_template, "AWS::Lambda::Version").items()
        if v["Properties"]["FunctionName"] == {"Ref": function}
    )
    # Retained: a new deploy's version replaces it in the template, not in the account.
    assert version["DeletionPolicy"] == "Retain"
    assert version["UpdateReplacePolicy"] == "Retain"
    alias = resources(any_template, "AWS::Lambda::Alias")[alias_of_function(any_template, name)]
    assert alias["Properties"]["Name"] == "live"
    assert alias["Properties"]["FunctionVersion"] == {"Fn::GetAtt": [version_id, "Version"]}


def test_one_version_per_function(any_template: Template) -> None:
    versions = resources(any_template, "AWS::Lambda::Version").values()
    owners = sorted(v["Properties"]["FunctionName"]["Ref"] for v in versions)
    assert owners == sorted(logical_id_of_function(any_template, n) for n in NAMES)


def test_a_retained_version_keeps_its_failure_destination(any_template: Template) -> None:
    configs = resources(any_template, "AWS::Lambda::EventInvokeConfig").values()
    per_version = [c for c in configs if "Fn::GetAtt" in json.dumps(c["Properties"]["Qualifier"])]
    assert len(per_version) == 2  # drive and sweeper, the asynchronous ones
    for invoke_config in per_version:
        assert invoke_config["DeletionPolicy"] == "Retain"


def test_nothing_invokes_a_function_of_ours_unqualified(any_template: Template) -> None:
    functions = {logical_id_of_function(any_template, n) for n in NAMES}
    unqualified = [{"Fn::GetAtt": [f, "Arn"]} for f in functions] + [{"Ref": f} for f in functions]
    for permission in resources(any_template, "AWS::Lambda::Permission").values():
        assert permission["Properties"]["FunctionName"] not in unqualified
    for schedule in resources(any_template, "AWS::Scheduler::Schedule").values():
        assert schedule["Properties"]["Target"]["Arn"] not in unqualified
    for mapping in resources(any_template, "AWS::Lambda::EventSourceMapping").values():
        assert mapping["Properties"]["FunctionName"] not in unqualified
    for integration in resources(any_template, "AWS::ApiGatewayV2::Integration").values():
        assert integration["Properties"]["IntegrationUri"] not in unqualified


def test_the_worker_step_host_is_dispatched_through_its_alias(
    variant_template: Template, variant_stack: Any
) -> None:
    env = functions_by_handler(variant_template)["drive"]["Environment"]["Variables"]
    rendered = json.dumps(variant_stack.resolve(env[config.ENV_DISPATCH_MAP]))
    worker_alias = alias_of_function(variant_template, "worker")
    assert json.dumps({"Ref": worker_alias}) in rendered
    worker = logical_id_of_function(variant_template, "worker")
    assert worker not in rendered


@pytest.mark.parametrize("function", ["api", "drive", "sweeper"])
def test_engine_functions_invoke_any_version_of_ours_and_other_hosts_unqualified(
    variant_template: Template, function: str
) -> None:
    names = functions_by_handler(variant_template)
    (invoke,) = _statements(variant_template, function, "lambda:InvokeFunction")
    worker = logical_id_of_function(variant_template, "worker")
    assert sorted(_described(r) for r in as_list(invoke["Resource"])) == sorted(
        [
            f":function:{names['api']['FunctionName']}:*",
            f":function:{names['drive']['FunctionName']}:*",
            f":function:{names['sweeper']['FunctionName']}:*",
            json.dumps({"Fn::Join": ["", [{"Fn::GetAtt": [worker, "Arn"]}, ":*"]]}),
            "arn:aws:lambda:eu-west-1:111111111111:function:billing-steps",
        ]
    )


def _described(resource: Any) -> str:
    # An ARN built from the partition, region and account: its literal tail names it.
    if isinstance(resource, str):
        return resource
    parts = resource.get("Fn::Join", ["", [None]])[1]
    return parts[-1] if isinstance(parts[-1], str) and len(parts) > 2 else json.dumps(resource)


def test_the_sweeper_lists_and_deletes_versions_of_the_four_functions_only(
    any_template: Template,
) -> None:
    functions = functions_by_handler(any_template)
    env = functions["sweeper"]["Environment"]["Variables"]
    named = json.dumps(env[config.ENV_VERSIONED_FUNCTIONS])
    for name in ("api", "drive", "sweeper"):
        assert functions[name]["FunctionName"] in named
    assert json.dumps({"Ref": logical_id_of_function(any_template, "worker")}) in named
    assert env[config.ENV_VERSION_RETENTION_DAYS] == "14"

    (listing,) = _statements(any_template, "sweeper", "lambda:ListVersionsByFunction")
    assert sorted(as_list(listing["Action"])) == [
        "lambda:ListAliases",
        "lambda:ListVersionsByFunction",
    ]
    assert len(as_list(listing["Resource"])) == 4
    (delete,) = _statements(any_template, "sweeper", "lambda:DeleteFunction")
    deletable = as_list(delete["Resource"])
    assert len(deletable) == 4
    # Qualified ARNs only: a version may go, the function itself never.
    assert all(json.dumps(r).endswith(':*"]]}') for r in deletable)
    for other in ("api", "drive", "worker"):
        assert _statements(any_template, other, "lambda:DeleteFunction") == []
