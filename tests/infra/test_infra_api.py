"""The HTTP API, the schedule group, the sweeper schedule, alarms and outputs."""

from __future__ import annotations

import json

import pytest
from aws_cdk.assertions import Template
from infra_asserts import alias_of_function, dead_letter_queue_id, only, resources

from relayflow.api.auth import parse_token_secret

pytestmark = pytest.mark.slow

PROTECTED = {"GET /api/{proxy+}", "POST /api/{proxy+}", "POST /__voyant/tokens/{tokenId}"}
PUBLIC = {
    "GET /api/healthz",
    "GET /api/openapi.json",
    # Swagger UI over the OpenAPI document, and its files.
    "GET /api/docs",
    "GET /api/docs/{proxy+}",
    "GET /",
    "GET /dashboard/{proxy+}",
    # Authorised by the capability the step request carried, checked in the api function.
    "POST /api/runs/{runId}/checkpoints",
}


def _routes(template: Template) -> dict[str, str]:
    return {
        r["Properties"]["RouteKey"]: r["Properties"]["AuthorizationType"]
        for r in resources(template, "AWS::ApiGatewayV2::Route").values()
    }


def test_api_is_http_with_lambda_proxy_payload_2(any_template: Template) -> None:
    only(any_template, "AWS::ApiGatewayV2::Api", ProtocolType="HTTP")
    (integration,) = resources(any_template, "AWS::ApiGatewayV2::Integration").values()
    props = integration["Properties"]
    assert props["IntegrationType"] == "AWS_PROXY"
    assert props["PayloadFormatVersion"] == "2.0"
    # Through the alias: requests reach the version deployed last, never $LATEST.
    assert props["IntegrationUri"] == {"Ref": alias_of_function(any_template, "api")}


@pytest.mark.parametrize(
    ("template_name", "protected_auth"), [("sample", "NONE"), ("variant", "AWS_IAM")]
)
def test_routes_and_their_authorization(
    request: pytest.FixtureRequest, template_name: str, protected_auth: str
) -> None:
    template: Template = request.getfixturevalue(f"{template_name}_template")
    routes = _routes(template)
    assert set(routes) == PROTECTED | PUBLIC
    # Bearer mode checks tokens in the api function; IAM mode at the gateway.
    assert {routes[r] for r in PROTECTED} == {protected_auth}
    assert {routes[r] for r in PUBLIC} == {"NONE"}


def test_default_stage_is_throttled_and_logs_access(any_template: Template) -> None:
    (stage,) = resources(any_template, "AWS::ApiGatewayV2::Stage").values()
    props = stage["Properties"]
    assert props["StageName"] == "$default"
    assert props["AutoDeploy"] is True
    assert props["DefaultRouteSettings"] == {
        "ThrottlingBurstLimit": 100,
        "ThrottlingRateLimit": 50,
    }
    access = props["AccessLogSettings"]
    assert access["DestinationArn"]["Fn::GetAtt"][1] == "Arn"
    assert "$context.requestId" in json.loads(access["Format"]).values()


def test_cors_is_answered_only_when_configured(
    sample_template: Template, variant_template: Template
) -> None:
    (sample_api,) = resources(sample_template, "AWS::ApiGatewayV2::Api").values()
    assert "CorsConfiguration" not in sample_api["Properties"]
    (variant_api,) = resources(variant_template, "AWS::ApiGatewayV2::Api").values()
    cors = variant_api["Properties"]["CorsConfiguration"]
    assert cors["AllowOrigins"] == ["https://app.example.com"]
    assert "authorization" in cors["AllowHeaders"]


def test_sweeper_runs_on_a_recurring_schedule_with_a_dlq(any_template: Template) -> None:
    (schedule,) = resources(any_template, "AWS::Scheduler::Schedule").values()
    props = schedule["Properties"]
    # Every minute (Scheduler's finest rate), so a run whose driver died waits at most a
    # lease plus a minute.
    assert props["ScheduleExpression"] == "rate(1 minute)"
    assert props["FlexibleTimeWindow"] == {"Mode": "OFF"}
    dlq = dead_letter_queue_id(any_template)
    assert props["Target"]["DeadLetterConfig"] == {"Arn": {"Fn::GetAtt": [dlq, "Arn"]}}


def test_alarm_group_name_is_valid_for_the_alarm_clock(any_template: Template) -> None:
    groups = resources(any_template, "AWS::Scheduler::ScheduleGroup").values()
    assert len(groups) == 2  # run alarms, and the workflows' recurring schedules
    for group in groups:
        name = group["Properties"]["Name"]
        assert 1 <= len(name) <= 64
        assert all(c.isalnum() or c in "-_." for c in name)


def test_dead_letter_queue_is_encrypted_and_tls_only(any_template: Template) -> None:
    queue = resources(any_template, "AWS::SQS::Queue")[dead_letter_queue_id(any_template)]
    assert queue["Properties"]["SqsManagedSseEnabled"] is True
    assert queue["Properties"]["MessageRetentionPeriod"] == 14 * 24 * 3600
    policies = resources(any_template, "AWS::SQS::QueuePolicy").values()
    assert len(policies) == 2  # the dead-letter queue and the alarm queue
    for policy in policies:
        denials = [
            s for s in policy["Properties"]["PolicyDocument"]["Statement"] if s["Effect"] == "Deny"
        ]
        assert denials[0]["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}


def test_the_alarm_queue_feeds_the_drive_function_with_partial_batch_failures(
    any_template: Template,
) -> None:
    dlq = dead_letter_queue_id(any_template)
    (alarm_queue_id,) = set(resources(any_template, "AWS::SQS::Queue")) - {dlq}
    queue = resources(any_template, "AWS::SQS::Queue")[alarm_queue_id]["Properties"]
    assert queue["SqsManagedSseEnabled"] is True
    assert queue["RedrivePolicy"] == {
        "deadLetterTargetArn": {"Fn::GetAtt": [dlq, "Arn"]},
        "maxReceiveCount": 5,
    }
    assert queue["VisibilityTimeout"] >= 15 * 60  # at least the drive function's timeout
    (mapping,) = resources(any_template, "AWS::Lambda::EventSourceMapping").values()
    props = mapping["Properties"]
    assert props["EventSourceArn"] == {"Fn::GetAtt": [alarm_queue_id, "Arn"]}
    # The drive function's alias, named `<function>:live` (from the alias ARN).
    alias_arn = {"Ref": alias_of_function(any_template, "drive")}
    assert props["FunctionName"] == {
        "Fn::Join": ["", [{"Fn::Select": [6, {"Fn::Split": [":", alias_arn]}]}, ":live"]]
    }
    assert props["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    assert props["BatchSize"] == 10


def test_alarms_cover_errors_throttles_dlq_and_api(any_template: Template) -> None:
    alarms = [a["Properties"] for a in resources(any_template, "AWS::CloudWatch::Alarm").values()]
    metrics = sorted((a["Namespace"], a["MetricName"]) for a in alarms)
    assert metrics.count(("AWS/Lambda", "Errors")) == 4
    assert metrics.count(("AWS/Lambda", "Throttles")) == 4
    assert ("AWS/SQS", "ApproximateNumberOfMessagesVisible") in metrics
    assert ("AWS/ApiGateway", "5xx") in metrics
    assert all(a["Threshold"] == 1 for a in alarms)


def test_alarms_notify_the_mail_topic_only_when_one_is_given(
    sample_template: Template, variant_template: Template
) -> None:
    assert resources(sample_template, "AWS::SNS::Topic") == {}
    for alarm in resources(sample_template, "AWS::CloudWatch::Alarm").values():
        assert "AlarmActions" not in alarm["Properties"]
    (topic,) = resources(variant_template, "AWS::SNS::Topic")
    only(variant_template, "AWS::SNS::Subscription", Protocol="email", Endpoint="ops@example.com")
    for alarm in resources(variant_template, "AWS::CloudWatch::Alarm").values():
        assert alarm["Properties"]["AlarmActions"] == [{"Ref": topic}]


def test_outputs_give_the_api_url_and_the_token_secret(
    sample_template: Template, variant_template: Template
) -> None:
    outputs = sample_template.to_json()["Outputs"]
    assert set(outputs) == {
        "RelayflowApiUrl",
        "RelayflowApiTokensSecretName",
        "RelayflowRunsTableName",
        "RelayflowDriveFunctionName",
        "RelayflowDeadLetterQueueUrl",
        "RelayflowAlarmQueueUrl",
    }
    url = outputs["RelayflowApiUrl"]["Value"]["Fn::Join"][1]
    assert url[0] == "https://" and url[-1] == "/"
    (secret,) = resources(sample_template, "AWS::SecretsManager::Secret")
    assert secret in json.dumps(outputs["RelayflowApiTokensSecretName"]["Value"])
    assert "RelayflowApiTokensSecretName" not in variant_template.to_json()["Outputs"]


def test_token_secret_starts_with_no_token(sample_template: Template) -> None:
    (secret,) = resources(sample_template, "AWS::SecretsManager::Secret").values()
    value = secret["Properties"]["SecretString"]
    assert json.loads(value) == {"tokens": []}
    # The api function reads it as a valid token list that accepts nobody yet.
    assert parse_token_secret(value) == ()


@pytest.mark.parametrize(("minutes", "expression"), [(1, "rate(1 minute)"), (5, "rate(5 minutes)")])
def test_the_sweeper_interval_becomes_a_scheduler_rate(minutes: int, expression: str) -> None:
    from aws_cdk import Duration

    from relayflow.cdk.scheduling import rate_expression

    assert rate_expression(Duration.minutes(minutes)) == expression


@pytest.mark.parametrize("seconds", [30, 90])
def test_a_sweeper_interval_scheduler_cannot_keep_is_refused(seconds: int) -> None:
    from aws_cdk import Duration

    from relayflow.cdk.scheduling import rate_expression

    with pytest.raises(ValueError, match="whole minutes"):
        rate_expression(Duration.seconds(seconds))
