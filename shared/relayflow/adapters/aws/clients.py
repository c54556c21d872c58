"""A cached, injectable factory of boto3 clients (created on first use, never at import)."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import boto3
from botocore.config import Config

from relayflow.adapters.aws.usage import AwsUsageRecorder
from relayflow.costs.meter import UsageMeter

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_lambda import LambdaClient
    from mypy_boto3_s3 import S3Client
    from mypy_boto3_scheduler import EventBridgeSchedulerClient
    from mypy_boto3_sqs import SQSClient

    from relayflow.adapters.aws.billing import TableSpec
    from relayflow.config import Settings

_STANDARD_CONFIG = Config(retries={"mode": "standard", "total_max_attempts": 5})
# A RequestResponse invoke waits for the step host, which may run up to Lambda's 15 minutes.
_LAMBDA_CONFIG = Config(
    retries={"mode": "standard", "total_max_attempts": 1}, read_timeout=905, connect_timeout=5
)


class AwsClients:
    """Builds one boto3 client per service on first use and hands out the same one after.

    Args:
        session: The boto3 session to build clients from (a new default session otherwise).
        region: Region name; None lets boto3 resolve it from the environment.
        endpoint_url: Endpoint override for every service (a local moto server, say).
        usage: Where the AWS work done for each run is counted once :meth:`record_usage`
            is called (a new meter otherwise).
    """

    def __init__(
        self,
        *,
        session: boto3.Session | None = None,
        region: str | None = None,
        endpoint_url: str | None = None,
        usage: UsageMeter | None = None,
    ) -> None:
        self._session = session
        self._region = region
        self._endpoint_url = endpoint_url
        self._clients: dict[str, Any] = {}
        self._lock = threading.Lock()
        self.usage = usage or UsageMeter()
        self._recorder: AwsUsageRecorder | None = None

    @classmethod
    def from_settings(cls, settings: Settings, **kwargs: Any) -> AwsClients:
        """A factory for the region of ``settings``."""
        return cls(region=settings.region, **kwargs)

    def client(self, service: str) -> Any:
        """The cached client of ``service`` (created now if this is the first request)."""
        with self._lock:
            existing = self._clients.get(service)
            if existing is not None:
                return existing
            if self._session is None:
                self._session = boto3.Session()
            config = self._config(service)
            created = self._session.client(
                service,  # type: ignore[call-overload]
                region_name=self._region,
                endpoint_url=self._endpoint_url,
                config=config,
            )
            self._clients[service] = created
            if self._recorder is not None:
                self._recorder.attach(created)
            return created

    def record_usage(self, tables: Mapping[str, TableSpec], runs_table: str | None) -> None:
        """Count what every request of these clients costs into ``usage``, per run (see
        ``relayflow.adapters.aws.usage``); a second call keeps the first's counting."""
        with self._lock:
            if self._recorder is None:
                self._recorder = AwsUsageRecorder(self.usage, tables, runs_table)
            for client in self._clients.values():
                self._recorder.attach(client)

    @property
    def recorder(self) -> AwsUsageRecorder | None:
        """What prices the requests of these clients (None until :meth:`record_usage`)."""
        return self._recorder

    def _config(self, service: str) -> Config:
        """The botocore settings of ``service``'s client."""
        return _LAMBDA_CONFIG if service == "lambda" else _STANDARD_CONFIG

    def dynamodb(self) -> DynamoDBClient:
        """The DynamoDB client."""
        client: DynamoDBClient = self.client("dynamodb")
        return client

    def s3(self) -> S3Client:
        """The S3 client."""
        client: S3Client = self.client("s3")
        return client

    def scheduler(self) -> EventBridgeSchedulerClient:
        """The EventBridge Scheduler client."""
        client: EventBridgeSchedulerClient = self.client("scheduler")
        return client

    def lambda_(self) -> LambdaClient:
        """The Lambda client."""
        client: LambdaClient = self.client("lambda")
        return client

    def sqs(self) -> SQSClient:
        """The SQS client."""
        client: SQSClient = self.client("sqs")
        return client
