"""The four relayflow Lambda functions: api, drive, sweeper and worker, each with its own role.

Every deploy publishes a version of each function, behind the alias `live` that everything
invoking it goes through; old versions are kept (a pinned run keeps invoking the version it
started on) until the sweeper deletes the ones no run needs any more.
"""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import ArnFormat, Duration, Names, RemovalPolicy, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_destinations as destinations
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sqs as sqs
from constructs import Construct

__all__ = [
    "ALIAS_NAME",
    "FUNCTION_SPECS",
    "FunctionHandlers",
    "FunctionSpec",
    "RelayflowFunctions",
    "drive_function_name",
    "function_arn",
    "relayflow_function_name",
]

RUNTIME = lambda_.Runtime.PYTHON_3_12
_MAX_FUNCTION_NAME = 64
#: The alias every invoker of a relayflow function goes through: the version deployed last.
ALIAS_NAME = "live"
#: Functions named from the construct's path instead of by CloudFormation: their own roles
#: name them (the api and drive invoke their own earlier versions, the sweeper deletes its
#: own), which a generated name would make a circular reference.
_NAMED = frozenset({"api", "drive", "sweeper"})


@dataclass(frozen=True)
class FunctionSpec:
    """What distinguishes one relayflow function from another.

    Attributes:
        handler: The package's entry point, the function's handler unless
            :class:`FunctionHandlers` names another.
    """

    name: str
    handler: str
    timeout: Duration
    description: str
    asynchronous: bool


FUNCTION_SPECS: tuple[FunctionSpec, ...] = (
    FunctionSpec(
        "api",
        "relayflow.entrypoints.api.lambda_handler",
        # API Gateway gives up on an integration after 30 s.
        Duration.seconds(29),
        "relayflow HTTP API",
        asynchronous=False,
    ),
    FunctionSpec(
        "drive",
        "relayflow.entrypoints.drive.lambda_handler",
        Duration.minutes(15),
        "relayflow drive: advances one run (alarms and hand-offs)",
        asynchronous=True,
    ),
    FunctionSpec(
        "sweeper",
        "relayflow.entrypoints.sweeper.lambda_handler",
        Duration.minutes(5),
        "relayflow sweeper: drives again the runs whose alarm was missed",
        asynchronous=True,
    ),
    FunctionSpec(
        "worker",
        "relayflow.entrypoints.worker.lambda_handler",
        Duration.minutes(15),
        "relayflow worker: hosts workflow bodies and answers step requests",
        asynchronous=False,
    ),
)


@dataclass(frozen=True)
class FunctionHandlers:
    """The handler of each function (`module.attribute`), when not the package's entry point.

    An app that keeps a thin module per function (for example `functions/api/handler.py`
    re-exporting `relayflow.entrypoints.api.lambda_handler`) names those modules here and
    bundles their folder with `LambdaBundle(workflow_paths=...)`. `None` keeps the default,
    `relayflow.entrypoints.<function>.lambda_handler`.
    """

    api: str | None = None
    drive: str | None = None
    sweeper: str | None = None
    worker: str | None = None

    def handler(self, spec: FunctionSpec) -> str:
        """The handler string of the function `spec` describes."""
        chosen: str | None = getattr(self, spec.name)
        return chosen or spec.handler

    def custom_modules(self) -> tuple[str, ...]:
        """The modules named instead of the package's entry points."""
        chosen = (getattr(self, spec.name) for spec in FUNCTION_SPECS)
        return tuple(h.rpartition(".")[0] for h in chosen if h)


def relayflow_function_name(scope: Construct, function: str) -> str:
    """A deterministic, unique name for the function `function` (`api`, `drive`...) of
    `scope` (at most 64 characters)."""
    suffix = f"-{function}"
    return (
        Names.unique_resource_name(
            scope, max_length=_MAX_FUNCTION_NAME - len(suffix), separator="-"
        )
        + suffix
    )


def drive_function_name(scope: Construct) -> str:
    """A deterministic, unique name for the drive function of `scope` (at most 64 characters).

    Alarms created at run time target the drive function, and the drive function arms alarms,
    so it needs its own ARN; a fixed name avoids a function that references itself.
    """
    return relayflow_function_name(scope, "drive")


class RelayflowFunctions(Construct):
    """The api, drive, sweeper and worker functions, with log groups and roles of their own.

    Roles start with nothing but writing to their own log group; the orchestrator grants each
    function exactly what it calls.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        code: lambda_.Code,
        architecture: lambda_.Architecture,
        memory_size: int,
        sweeper_memory_size: int,
        log_retention: logs.RetentionDays,
        removal_policy: RemovalPolicy,
        names: dict[str, str],
        failure_queue: sqs.IQueue,
        handlers: FunctionHandlers | None = None,
    ) -> None:
        """Create the functions (those in `names` get that name) and their `live` aliases;
        async invocations that keep failing go to `failure_queue`."""
        super().__init__(scope, construct_id)
        self.functions: dict[str, lambda_.Function] = {}
        self.aliases: dict[str, lambda_.Alias] = {}
        handlers = handlers or FunctionHandlers()
        for spec in FUNCTION_SPECS:
            log_group = logs.LogGroup(
                self,
                f"{spec.name.capitalize()}Logs",
                retention=log_retention,
                removal_policy=removal_policy,
            )
            role = iam.Role(
                self,
                f"{spec.name.capitalize()}Role",
                assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
                description=f"relayflow {spec.name} function",
            )
            function = lambda_.Function(
                self,
                spec.name.capitalize(),
                function_name=names.get(spec.name),
                description=spec.description,
                code=code,
                handler=handlers.handler(spec),
                runtime=RUNTIME,
                architecture=architecture,
                memory_size=sweeper_memory_size if spec.name == "sweeper" else memory_size,
                timeout=spec.timeout,
                role=role,
                log_group=log_group,
                logging_format=lambda_.LoggingFormat.JSON,
                application_log_level_v2=lambda_.ApplicationLogLevel.INFO,
                system_log_level_v2=lambda_.SystemLogLevel.WARN,
                environment={
                    "POWERTOOLS_SERVICE_NAME": f"relayflow-{spec.name}",
                    "POWERTOOLS_METRICS_NAMESPACE": "relayflow",
                },
                retry_attempts=2 if spec.asynchronous else None,
                max_event_age=Duration.hours(1) if spec.asynchronous else None,
                on_failure=destinations.SqsDestination(failure_queue)
                if spec.asynchronous
                else None,
                current_version_options=_version_options(spec, failure_queue),
            )
            # The role is created here, so logging rights are granted explicitly (no managed
            # policy), scoped to the function's own log group.
            log_group.grant_write(role)
            self.functions[spec.name] = function
            self.aliases[spec.name] = self._alias(spec, function, failure_queue)

    def _alias(
        self, spec: FunctionSpec, function: lambda_.Function, failure_queue: sqs.IQueue
    ) -> lambda_.Alias:
        version = function.current_version
        # A retained version keeps its own asynchronous-invocation settings: a pinned run's
        # hand-off to it may still fail over to the dead-letter queue.
        invoke_config = version.node.try_find_child("EventInvokeConfig")
        if invoke_config is not None:
            invoke_config.node.default_child.apply_removal_policy(  # type: ignore[union-attr]
                RemovalPolicy.RETAIN
            )
        return lambda_.Alias(
            self,
            f"{spec.name.capitalize()}Alias",
            alias_name=ALIAS_NAME,
            version=version,
            description=f"relayflow {spec.name}: the version deployed last",
            retry_attempts=2 if spec.asynchronous else None,
            max_event_age=Duration.hours(1) if spec.asynchronous else None,
            on_failure=destinations.SqsDestination(failure_queue) if spec.asynchronous else None,
        )

    @property
    def api(self) -> lambda_.Function:
        """The function behind the HTTP API."""
        return self.functions["api"]

    @property
    def drive(self) -> lambda_.Function:
        """The function alarms and hand-offs invoke to advance a run."""
        return self.functions["drive"]

    @property
    def sweeper(self) -> lambda_.Function:
        """The function the recurring sweeper schedule invokes."""
        return self.functions["sweeper"]

    @property
    def worker(self) -> lambda_.Function:
        """The step host function (hosts workflow bodies)."""
        return self.functions["worker"]


def _version_options(spec: FunctionSpec, failure_queue: sqs.IQueue) -> lambda_.VersionOptions:
    # Old versions stay when a deploy publishes a new one: runs pinned to them still invoke
    # them. The sweeper deletes them once no run needs them (RELAYFLOW_VERSION_RETENTION_DAYS).
    return lambda_.VersionOptions(
        removal_policy=RemovalPolicy.RETAIN,
        description=f"relayflow {spec.name}",
        retry_attempts=2 if spec.asynchronous else None,
        max_event_age=Duration.hours(1) if spec.asynchronous else None,
        on_failure=destinations.SqsDestination(failure_queue) if spec.asynchronous else None,
    )


def function_arn(stack: Stack, function_name: str) -> str:
    """The ARN of the function named `function_name` in `stack`'s account and region."""
    return stack.format_arn(
        service="lambda",
        resource="function",
        resource_name=function_name,
        arn_format=ArnFormat.COLON_RESOURCE_NAME,
    )
