"""The API as deployed, over HTTP: the AWS driver on atomic moto behind the local HTTP adapter.

``serve_api`` builds the resources, the driver and the API, and serves it on a free port; a
test reaches it with ``requests`` and talks to the same moto with boto3.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import boto3
import requests

from relayflow.adapters.aws.clients import AwsClients
from relayflow.adapters.aws.payloads import S3PayloadStore
from relayflow.adapters.aws.tables import create_resources
from relayflow.adapters.aws.wiring import build_aws_driver
from relayflow.api.app import create_app
from relayflow.api.auth import StaticTokenAuth
from relayflow.api.handler import make_drive_handler, make_lambda_handler
from relayflow.config import Settings
from relayflow.drivers import WorkflowDriver
from relayflow.local.http_adapter import LambdaHttpServer
from relayflow.local.lambda_router import LocalLambdaClient
from relayflow.local.stack import LocalAwsClients
from relayflow.ports import Clock
from relayflow.testing.aws import mock_aws
from relayflow.worker.hosts import make_lambda_handler as make_worker_handler

REGION = "eu-west-1"
ACCOUNT = "123456789012"
TOKEN = "http-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
QUEUE = "relayflow-alarms"
ENV = {
    "RELAYFLOW_TABLE_NAME": "relayflow-runs",
    "RELAYFLOW_MANIFESTS_TABLE": "relayflow-manifests",
    "RELAYFLOW_PAYLOAD_BUCKET": "relayflow-payloads",
    "RELAYFLOW_SCHEDULE_GROUP": "relayflow",
    "RELAYFLOW_SCHEDULER_ROLE_ARN": f"arn:aws:iam::{ACCOUNT}:role/scheduler",
    "RELAYFLOW_DRIVE_FUNCTION_ARN": f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:drive",
    "RELAYFLOW_ALARM_QUEUE_URL": f"https://sqs.{REGION}.amazonaws.com/{ACCOUNT}/{QUEUE}",
    "RELAYFLOW_REGION": REGION,
    # Steps go to a worker function, which holds values over the inline cap by reference.
    "RELAYFLOW_DISPATCHER": "lambda",
    "RELAYFLOW_DISPATCH_FUNCTION": "worker",
    "RELAYFLOW_SIGNING_SECRET": "http-api-signing-secret-of-32-bytes",
    # Hosted in the orchestrator: values stay in the run's record, however large.
    "RELAYFLOW_DISPATCH_MAP": '{"inline.big": "inline"}',
}


@dataclass
class HttpApi:
    """The served API, its driver and the clients the driver uses."""

    url: str
    driver: WorkflowDriver
    clients: AwsClients
    settings: Settings

    def get(self, path: str) -> requests.Response:
        return requests.get(f"{self.url}{path}", headers=AUTH, timeout=30)

    def post(self, path: str, body: Any) -> requests.Response:
        return requests.post(f"{self.url}{path}", json=body, headers=AUTH, timeout=30)


@contextmanager
def serve_api(
    *,
    hand_off: bool = False,
    prepare: Callable[[AwsClients], None] | None = None,
    clock: Clock | None = None,
) -> Iterator[HttpApi]:
    """Serve the API on a free port over the AWS driver on a fresh moto.

    Args:
        hand_off: As deployed (the api drives nothing; the drive function, run here on the
            local Lambda client, does), or drive each run inline within the budget.
        prepare: Called with the driver's clients before the driver is built (to register
            faults on them).
        clock: The driver's clock (the wall clock when None).
    """
    with mock_aws(config={"core": {"reset_boto3_session": False}}, region=REGION):
        settings = Settings.from_env(ENV)
        boto3.client("sqs", region_name=REGION).create_queue(QueueName=QUEUE)
        create_resources(AwsClients.from_settings(settings), settings)
        with another_api(settings, hand_off=hand_off, prepare=prepare, clock=clock) as api:
            yield api


@contextmanager
def another_api(
    settings: Settings,
    *,
    hand_off: bool = False,
    prepare: Callable[[AwsClients], None] | None = None,
    clock: Clock | None = None,
) -> Iterator[HttpApi]:
    """Another API process on the same moto: a driver of its own, remembering nothing."""
    drive: list[Callable[[Any, Any], Any]] = []
    worker: list[Callable[[Any, Any], Any]] = []
    local = LocalLambdaClient(
        {
            "drive": lambda event, context: drive[0](event, context),
            "worker": lambda event, context: worker[0](event, context),
        }
    )
    clients = LocalAwsClients(local, region=REGION)
    if prepare is not None:
        prepare(clients)
    driver = build_aws_driver(settings, clients=clients, clock=clock)
    drive.append(make_drive_handler(lambda: driver, settings=lambda: settings))
    payloads = S3PayloadStore(settings.require("payload_bucket"), client_factory=clients.s3)
    worker.append(
        make_worker_handler(
            secret=settings.signing_secret,
            payload_store=payloads,
            payload_cap=settings.inline_payload_cap,
        )
    )
    handler = make_lambda_handler(
        lambda: create_app(driver, driver.admin, auth=StaticTokenAuth([TOKEN]), hand_off=hand_off)
    )
    server = LambdaHttpServer(handler, port=0)
    server.start()
    try:
        yield HttpApi(url=server.url, driver=driver, clients=clients, settings=settings)
    finally:
        server.stop()
        local.close()
