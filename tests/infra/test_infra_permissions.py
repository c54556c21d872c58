"""Least privilege: who may invoke what, and no wildcard actions anywhere."""

from __future__ import annotations

import json
from typing import Any

import pytest
from aws_cdk.assertions import Template
from infra_asserts import (
    alias_of_function,
    as_list,
    dead_letter_queue_id,
    functions_by_handler,
    logical_id_of_function,
    policy_statements,
    resources,
    role_statements,
)

pytestmark = pytest.mark.slow


def _role_of(template: Template, function: str) -> str:
    role: str = functions_by_handler(template)[function]["Role"]["Fn::GetAtt"][0]
    return role


def _scheduler_roles(template: Template) -> dict[str, dict[str, Any]]:
    return {
        logical_id: role
        for logical_id, role in resources(template, "AWS::IAM::Role").items()
        if role["Properties"]["AssumeRolePolicyDocument"]["Statement"][0]["Principal"]
        == {"Service": "scheduler.amazonaws.com"}
    }


def _actions(statements: list[dict[str, Any]]) -> set[str]:
    return {action for s in statements for action in as_list(s["Action"])}


def test_no_identity_policy_grants_a_wildcard_action(any_template: Template) -> None:
    for logical_id, statement in policy_statements(any_template):
        if logical_id.startswith("CustomS3AutoDeleteObjects"):
            continue  # CDK's bucket-emptying provider (dev stage only)
        for action in as_list(statement["Action"]):
            assert "*" not in action, f"{logical_id} grants {action}"


def test_alarm_role_may_only_invoke_the_drive_functions_alias(any_template: Template) -> None:
    functions = functions_by_handler(any_template)
    drive_name = functions["drive"]["FunctionName"]
    alarm_role_arn = functions["api"]["Environment"]["Variables"]["RELAYFLOW_SCHEDULER_ROLE_ARN"]
    role_id = alarm_role_arn["Fn::GetAtt"][0]
    statements = role_statements(any_template, role_id)
    assert len(statements) == 1
    (statement,) = statements
    assert statement["Effect"] == "Allow"
    assert as_list(statement["Action"]) == ["lambda:InvokeFunction"]
    (resource,) = as_list(statement["Resource"])
    assert resource["Fn::Join"][1][-1] == f":function:{drive_name}:live"


def test_scheduler_roles_are_assumable_only_from_this_account(any_template: Template) -> None:
    roles = _scheduler_roles(any_template)
    assert len(roles) == 2  # run alarms and the sweeper schedule
    for role in roles.values():
        (statement,) = role["Properties"]["AssumeRolePolicyDocument"]["Statement"]
        assert statement["Condition"] == {
            "StringEquals": {"aws:SourceAccount": {"Ref": "AWS::AccountId"}}
        }


def test_sweeper_schedule_role_may_only_invoke_the_sweepers_alias(
    any_template: Template,
) -> None:
    (schedule,) = resources(any_template, "AWS::Scheduler::Schedule").values()
    target = schedule["Properties"]["Target"]
    sweeper = alias_of_function(any_template, "sweeper")
    assert target["Arn"] == {"Ref": sweeper}
    statements = role_statements(any_template, target["RoleArn"]["Fn::GetAtt"][0])
    assert [(s["Action"], s["Resource"]) for s in statements] == [
        ("lambda:InvokeFunction", {"Ref": sweeper})
    ]


def test_scheduler_roles_reach_the_dlq_only_through_its_queue_policy(
    any_template: Template,
) -> None:
    dlq = dead_letter_queue_id(any_template)
    (policy,) = [
        p
        for p in resources(any_template, "AWS::SQS::QueuePolicy").values()
        if p["Properties"]["Queues"] == [{"Ref": dlq}]
    ]
    allowed = [
        s for s in policy["Properties"]["PolicyDocument"]["Statement"] if s["Effect"] == "Allow"
    ]
    assert {s["Action"] for s in allowed} == {"sqs:SendMessage"}
    principals = {p["Fn::GetAtt"][0] for s in allowed for p in as_list(s["Principal"]["AWS"])}
    assert principals == set(_scheduler_roles(any_template))


def test_engine_functions_get_exactly_the_calls_they_make(sample_template: Template) -> None:
    expected = {
        "logs:CreateLogStream",
        "logs:PutLogEvents",
        "dynamodb:BatchGetItem",
        "dynamodb:BatchWriteItem",
        "dynamodb:ConditionCheckItem",
        "dynamodb:DeleteItem",
        "dynamodb:DescribeTable",
        "dynamodb:GetItem",
        "dynamodb:GetRecords",
        "dynamodb:GetShardIterator",
        "dynamodb:PutItem",
        "dynamodb:Query",
        "dynamodb:Scan",
        "dynamodb:UpdateItem",
        "s3:GetObject",
        "s3:PutObject",
        "s3:DeleteObject",
        "scheduler:CreateSchedule",
        "scheduler:UpdateSchedule",
        "scheduler:DeleteSchedule",
        "scheduler:GetSchedule",
        "scheduler:ListSchedules",
        "iam:PassRole",
        "lambda:InvokeFunction",
    }
    # Every engine function queues near alarms; drive and sweeper also send failed
    # asynchronous invocations to the dead-letter queue.
    expected |= {"sqs:SendMessage", "sqs:GetQueueAttributes", "sqs:GetQueueUrl"}
    async_failures: set[str] = set()
    consume = {"sqs:ReceiveMessage", "sqs:ChangeMessageVisibility", "sqs:DeleteMessage"}
    token_secret = {"secretsmanager:GetSecretValue", "secretsmanager:DescribeSecret"}
    clean_up = {"lambda:ListVersionsByFunction", "lambda:ListAliases", "lambda:DeleteFunction"}
    for name, extra in (
        ("api", token_secret),
        ("drive", async_failures | consume),
        ("sweeper", async_failures | clean_up),
    ):
        statements = role_statements(sample_template, _role_of(sample_template, name))
        assert _actions(statements) == expected | extra, name


def test_pass_role_is_limited_to_the_alarm_role_and_scheduler(sample_template: Template) -> None:
    statements = role_statements(sample_template, _role_of(sample_template, "drive"))
    (pass_role,) = [s for s in statements if s["Action"] == "iam:PassRole"]
    assert pass_role["Condition"] == {
        "StringEquals": {"iam:PassedToService": "scheduler.amazonaws.com"}
    }
    alarm_roles = [
        r
        for r in _scheduler_roles(sample_template)
        if json.dumps(role_statements(sample_template, r)).find(":function:") > 0
    ]
    assert pass_role["Resource"] == {"Fn::GetAtt": [alarm_roles[0], "Arn"]}


def test_worker_only_moves_payload_objects_appends_checkpoints_and_reserves_rate_limits(
    sample_template: Template,
) -> None:
    statements = role_statements(sample_template, _role_of(sample_template, "worker"))
    assert _actions(statements) == {
        "dynamodb:GetItem",
        "dynamodb:PutItem",
        "logs:CreateLogStream",
        "logs:PutLogEvents",
        "s3:GetObject",
        "s3:PutObject",
    }
    (put,) = [s for s in statements if s["Action"] == "dynamodb:PutItem"]
    assert "Fn::GetAtt" in put["Resource"]
    (get,) = [s for s in statements if s["Action"] == "dynamodb:GetItem"]
    assert get["Condition"] == {"ForAllValues:StringLike": {"dynamodb:LeadingKeys": ["#rate#*"]}}
    (s3,) = [s for s in statements if s["Action"] == ["s3:GetObject", "s3:PutObject"]]
    assert s3["Resource"]["Fn::Join"][1][-1] == "/payloads/*"


def test_step_host_functions_are_invocable_by_the_engine(variant_template: Template) -> None:
    statements = role_statements(variant_template, _role_of(variant_template, "drive"))
    (invoke,) = [s for s in statements if s["Action"] == "lambda:InvokeFunction"]
    rendered = json.dumps(invoke["Resource"])
    worker = logical_id_of_function(variant_template, "worker")
    assert "arn:aws:lambda:eu-west-1:111111111111:function:billing-steps" in rendered
    assert worker in rendered
    assert "-drive" in rendered


def test_iam_mode_creates_no_token_secret(variant_template: Template) -> None:
    assert resources(variant_template, "AWS::SecretsManager::Secret") == {}


def test_no_role_of_ours_uses_a_managed_policy(any_template: Template) -> None:
    for logical_id, role in resources(any_template, "AWS::IAM::Role").items():
        if logical_id.startswith("CustomS3AutoDeleteObjects"):
            continue  # CDK's bucket-emptying provider (dev stage only), acknowledged for nag
        assert "ManagedPolicyArns" not in role["Properties"], logical_id
