"""The API's AWS parts on moto: token digests read from Secrets Manager, and rotation."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from apigw import FakeLambdaContext, decode, http_event

from relayflow.adapters.aws.secrets import SecretsManagerSecret
from relayflow.api.auth import BearerTokenAuth, hash_token
from relayflow.api.settings import ApiSettings
from relayflow.errors import ValidationError
from relayflow.testing import WorkflowTestEnv
from relayflow.testing.aws import mock_aws

REGION = "eu-west-1"


@pytest.fixture
def aws() -> Iterator[None]:
    with mock_aws(config={"core": {"reset_boto3_session": False}}, region=REGION):
        yield


def _put(name: str, tokens: list[dict[str, object]]) -> str:
    client = boto3.client("secretsmanager", region_name=REGION)
    secret = json.dumps({"tokens": tokens})
    try:
        arn: str = client.create_secret(Name=name, SecretString=secret)["ARN"]
    except client.exceptions.ResourceExistsException:
        arn = client.put_secret_value(SecretId=name, SecretString=secret)["ARN"]
    return arn


def test_the_secret_is_read_by_name_or_arn(aws: None) -> None:
    arn = _put("relayflow/api-tokens", [{"sha256": hash_token("t"), "name": "ci"}])

    for secret_id in ("relayflow/api-tokens", arn):
        auth = BearerTokenAuth(SecretsManagerSecret(secret_id, region=REGION))
        assert auth.authenticate({"authorization": "Bearer t"}, {}).name == "ci"


def test_a_rotated_secret_is_picked_up_after_the_ttl(aws: None) -> None:
    _put("tokens", [{"sha256": hash_token("old"), "name": "old"}])
    clock = [0.0]
    auth = BearerTokenAuth(
        SecretsManagerSecret("tokens", region=REGION), ttl_s=60, monotonic=lambda: clock[0]
    )
    assert auth.authenticate({"authorization": "Bearer old"}, {}).name == "old"

    _put("tokens", [{"sha256": hash_token("new"), "name": "new"}])
    clock[0] += 61

    assert auth.authenticate({"authorization": "Bearer new"}, {}).name == "new"


def test_a_binary_secret_is_refused(aws: None) -> None:
    boto3.client("secretsmanager", region_name=REGION).create_secret(
        Name="binary", SecretBinary=b"\x00\x01"
    )

    with pytest.raises(ValidationError):
        SecretsManagerSecret("binary", region=REGION)()


def test_bearer_mode_from_settings_serves_the_api(aws: None, workflows: list[object]) -> None:
    from relayflow.api.app import create_app

    _put("relayflow-tokens", [{"sha256": hash_token("tok"), "scopes": ["runs:read"]}])
    settings = ApiSettings.from_env({"RELAYFLOW_API_TOKENS_SECRET": "relayflow-tokens"})
    env = WorkflowTestEnv(workflows=workflows)
    app = create_app(env.driver, env.admin, auth=settings.authenticator())

    read = decode(app.resolve(http_event("GET", "/api/runs", token="tok"), FakeLambdaContext()))
    write = decode(
        app.resolve(
            http_event("POST", "/api/runs", token="tok", body={"workflowId": "api.echo"}),
            FakeLambdaContext(),
        )
    )

    assert read.status == 200
    assert (write.status, write.body["error"]) == (403, "forbidden")


def _aws_env() -> dict[str, str]:
    return {
        "RELAYFLOW_TABLE_NAME": "relayflow-runs",
        "RELAYFLOW_MANIFESTS_TABLE": "relayflow-manifests",
        "RELAYFLOW_PAYLOAD_BUCKET": "relayflow-payloads",
        "RELAYFLOW_SCHEDULE_GROUP": "relayflow",
        "RELAYFLOW_SCHEDULER_ROLE_ARN": "arn:aws:iam::123456789012:role/scheduler",
        "RELAYFLOW_DRIVE_FUNCTION_ARN": "arn:aws:lambda:eu-west-1:123456789012:function:drive",
        "RELAYFLOW_REGION": REGION,
        "RELAYFLOW_API_AUTH": "static",
        "RELAYFLOW_API_TOKENS": "moto-token",
    }


def test_the_lambda_handler_over_the_aws_driver(aws: None, workflows: list[object]) -> None:
    """The deployed wiring: the api function inserts runs and hands them to the drive
    function (run here by the local Lambda client), waiting up to the inline budget."""
    import relayflow.adapters.aws as aws_adapters

    if not hasattr(aws_adapters, "build_aws_driver"):
        pytest.skip("the AWS driver is not available")
    from relayflow.adapters.aws.clients import AwsClients
    from relayflow.adapters.aws.tables import create_resources
    from relayflow.api import handler as handlers
    from relayflow.config import Settings
    from relayflow.local.lambda_router import LocalLambdaClient
    from relayflow.local.stack import LocalAwsClients

    env = _aws_env()
    settings = Settings.from_env(env)
    create_resources(AwsClients.from_settings(settings), settings)
    drive: list[Any] = []
    local = LocalLambdaClient({"drive": lambda event, context: drive[0](event, context)})
    driver = aws_adapters.build_aws_driver(settings, clients=LocalAwsClients(local, region=REGION))
    drive.append(handlers.make_drive_handler(lambda: driver, settings=lambda: settings))
    handler = handlers.make_lambda_handler(
        lambda: handlers.build_app_from_env(env, driver=lambda: driver)
    )
    ctx = FakeLambdaContext()

    def call(method: str, path: str, body: object = None) -> Any:
        return decode(handler(http_event(method, path, body=body, token="moto-token"), ctx))

    try:
        created = call(
            "POST", "/api/runs", {"workflowId": "api.echo", "input": 5, "idempotencyKey": "k"}
        )
        again = call(
            "POST", "/api/runs", {"workflowId": "api.echo", "input": 6, "idempotencyKey": "k"}
        )
        parked = call("POST", "/api/runs", {"workflowId": "api.signal"})
        listed = call("GET", "/api/runs", None)
        signalled = call(
            "POST", f"/api/runs/{parked.body['id']}/signals", {"name": "go", "payload": 1}
        )
        missing = call("GET", "/api/runs/none", None)
        # Follow the signalled run until the drive function it was handed to ends it.
        list(driver.admin.stream_run(parked.body["id"], follow=True, timeout_s=60))
    finally:
        local.close()

    assert (created.status, created.body["status"]) == (201, "completed")
    assert created.body["output"] == {"echo": 5}
    assert (again.status, again.body["input"]) == (200, 5)
    assert parked.body["status"] == "waiting"
    assert {r["id"] for r in listed.body["runs"]} == {created.body["id"], parked.body["id"]}
    assert (signalled.status, signalled.body["delivery"]["status"]) == (200, "resolved")
    assert (missing.status, missing.body["error"]) == (404, "not_found")
    assert driver.admin.get_run(parked.body["id"]).output == {"go": 1}
