"""Settings of a relayflow deployment: the props of `RelayflowOrchestrator` and its step hosts."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Literal

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_secretsmanager as secretsmanager
from aws_cdk import aws_sns as sns

from relayflow.cdk.bundling import LambdaBundle
from relayflow.cdk.functions import FunctionHandlers

__all__ = [
    "ApiAuthMode",
    "CorsSettings",
    "HttpStepHost",
    "InlineStepHost",
    "LambdaStepHost",
    "RelayflowOrchestratorProps",
    "StepHost",
    "WorkerStepHost",
]


class ApiAuthMode(enum.Enum):
    """How callers of the HTTP API authenticate."""

    BEARER = "bearer"
    """`Authorization: Bearer <token>`; the api function compares it with hashes in a secret."""
    IAM = "iam"
    """SigV4-signed requests checked by API Gateway (callers need `execute-api:Invoke`)."""


@dataclass(frozen=True)
class CorsSettings:
    """CORS answered by API Gateway for browser callers.

    Attributes:
        allow_origins: Origins allowed to call the API (`["*"]` for any).
        allow_headers: Request headers browsers may send.
        allow_methods: HTTP methods browsers may use.
        max_age: How long browsers may cache a preflight answer.
    """

    allow_origins: tuple[str, ...]
    allow_headers: tuple[str, ...] = ("authorization", "content-type", "x-relayflow-protocol")
    allow_methods: tuple[str, ...] = ("GET", "POST", "OPTIONS")
    max_age: Duration = field(default_factory=lambda: Duration.hours(1))


@dataclass(frozen=True)
class InlineStepHost:
    """Workflows that run inside the orchestrator's own functions (no extra hop).

    Attributes:
        module: Python module (inside the bundle) whose import registers the workflows.
        workflows: Workflow ids routed here; empty makes this the default step host.
    """

    module: str = "examples"
    workflows: tuple[str, ...] = ()


@dataclass(frozen=True)
class WorkerStepHost:
    """Workflows hosted by the deployment's own worker function, invoked through Lambda.

    The worker imports ``module`` (through ``RELAYFLOW_WORKFLOW_MODULES``) on its first
    request, which registers the workflows it hosts; the module must be in the bundle.

    Attributes:
        module: Importable module (or comma-separated modules) defining the workflows.
        workflows: Workflow ids routed here; empty makes this the default step host.
    """

    module: str = "examples"
    workflows: tuple[str, ...] = ()


@dataclass(frozen=True)
class LambdaStepHost:
    """Workflows hosted by an existing Lambda function that answers step requests.

    Attributes:
        function: The step host function; the orchestrator is granted `lambda:InvokeFunction`.
        workflows: Workflow ids routed here; empty makes this the default step host.
    """

    function: lambda_.IFunction
    workflows: tuple[str, ...] = ()


@dataclass(frozen=True)
class HttpStepHost:
    """Workflows hosted behind an HTTPS endpoint; each step request is signed.

    Attributes:
        url: The endpoint step requests are POSTed to.
        signing_secret: Secret whose value signs requests (HMAC-SHA256). All HTTP step hosts of
            one deployment share one secret.
        workflows: Workflow ids routed here; empty makes this the default step host.
        signing_mode: `relayflow` (timestamped signature) or `voyant` (reference-compatible).
    """

    url: str
    signing_secret: secretsmanager.ISecret
    workflows: tuple[str, ...] = ()
    signing_mode: Literal["relayflow", "voyant"] = "relayflow"


StepHost = InlineStepHost | WorkerStepHost | LambdaStepHost | HttpStepHost


@dataclass(frozen=True)
class RelayflowOrchestratorProps:
    """What a relayflow deployment looks like.

    Attributes:
        environment_name: Deployment name (for example `dev`, `prod`); names resources and
            tags them. Letters, digits and hyphens.
        step_hosts: Where workflow bodies run. At most one host has no `workflows` (the
            default); with none, workflows run inline in the orchestrator's functions.
        architecture: Lambda architecture; arm64 is cheaper per millisecond.
        memory_size: Memory (MiB) of the api, drive and worker functions.
        sweeper_memory_size: Memory (MiB) of the sweeper function.
        api_auth: How API callers authenticate (bearer tokens or IAM).
        cors: CORS for browser callers; `None` answers no preflight.
        run_retention_days: Days finished runs are kept before the table's TTL removes them.
        version_retention_days: Days a published version of a relayflow function is kept
            after it was published and after the last run pinned to it ended; then the
            sweeper deletes it (unless an alias points to it or a run pinned to it lives).
        payload_expiration_days: Days after which payload objects expire; `None` keeps them.
            Payloads are shared by content hash, so pick a value well above the longest life
            of a run plus `run_retention_days`.
        removal_policy: What happens to the table and buckets when the stack is deleted.
        alarm_email: Address subscribed to the alarm topic; `None` for no subscription.
        alarm_topic: Existing topic alarms notify; overrides `alarm_email`.
        dashboard: Create the CloudWatch dashboard `relayflow-<environment_name>` (runs,
            steps, queue depth and alarm lateness per workflow; Lambda, DynamoDB and SQS
            health). Off: no dashboard (the metrics are emitted all the same).
        log_retention: How long function and API access logs are kept.
        sweeper_interval: How often the sweeper looks for runs whose alarm was missed or
            whose holder died (whole minutes, at least one: Scheduler's finest rate). A run
            whose holder died is driven again at most the lease plus this after the crash.
        api_throttle_rate: Steady-state requests per second the API accepts.
        api_throttle_burst: Burst of requests the API accepts.
        inline_drive_budget: How long the api function drives a new run before handing off.
        bundle: How Lambda code is bundled (project root, cache folder); the architecture
            is taken from `architecture`.
        code: Ready-made Lambda code to use instead of bundling (for example a prebuilt zip).
        handlers: Handlers of your own for some functions (thin modules in your bundle);
            by default each function runs `relayflow.entrypoints.<function>.lambda_handler`.
        http_checkpoints: HTTP step hosts make each step durable through the API's
            checkpoint route (`RELAYFLOW_HTTP_CHECKPOINT_URL` is the API's URL); needs an
            `HttpStepHost`. Off: HTTP hosts are durable per invocation.
    """

    environment_name: str = "dev"
    step_hosts: tuple[StepHost, ...] = ()
    architecture: lambda_.Architecture = field(default_factory=lambda: lambda_.Architecture.ARM_64)
    memory_size: int = 1024
    sweeper_memory_size: int = 256
    api_auth: ApiAuthMode = ApiAuthMode.BEARER
    cors: CorsSettings | None = None
    run_retention_days: int = 30
    version_retention_days: int = 14
    payload_expiration_days: int | None = None
    removal_policy: RemovalPolicy = RemovalPolicy.RETAIN
    alarm_email: str | None = None
    alarm_topic: sns.ITopic | None = None
    dashboard: bool = True
    log_retention: logs.RetentionDays = logs.RetentionDays.ONE_MONTH
    sweeper_interval: Duration = field(default_factory=lambda: Duration.minutes(1))
    api_throttle_rate: int = 50
    api_throttle_burst: int = 100
    inline_drive_budget: Duration = field(default_factory=lambda: Duration.seconds(10))
    bundle: LambdaBundle = field(default_factory=LambdaBundle)
    code: lambda_.Code | None = None
    handlers: FunctionHandlers = field(default_factory=FunctionHandlers)
    http_checkpoints: bool = False
