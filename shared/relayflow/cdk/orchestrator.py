"""`RelayflowOrchestrator`: one construct that deploys relayflow (storage, functions, API, time).

It composes one construct per capability and wires them: environment variables (names from
`relayflow.config` and `relayflow.api`), least-privilege grants, alarms and outputs.
"""

from __future__ import annotations

import dataclasses
import json
import re

from aws_cdk import CfnOutput, Duration, SecretValue, Stack, Tags
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_secretsmanager as secretsmanager
from constructs import Construct, IConstruct

from relayflow import config
from relayflow.adapters.aws import tables
from relayflow.adapters.aws.rate_limits import PARTITION_PREFIX as RATE_LIMIT_PARTITION_PREFIX
from relayflow.api import settings as api_settings
from relayflow.cdk.api import RelayflowHttpApi
from relayflow.cdk.bundling import BundleError, LambdaBundle, lambda_code
from relayflow.cdk.dashboard import RelayflowDashboard
from relayflow.cdk.functions import (
    ALIAS_NAME,
    FunctionHandlers,
    RelayflowFunctions,
    function_arn,
    relayflow_function_name,
)
from relayflow.cdk.monitoring import RelayflowMonitoring
from relayflow.cdk.props import (
    ApiAuthMode,
    HttpStepHost,
    InlineStepHost,
    LambdaStepHost,
    RelayflowOrchestratorProps,
    StepHost,
    WorkerStepHost,
)
from relayflow.cdk.scheduling import RelayflowScheduling
from relayflow.cdk.storage import PAYLOAD_PREFIX, RelayflowStorage
from relayflow.cdk.suppressions import acknowledge
from relayflow.cdk.timers import RelayflowTimers

__all__ = ["RelayflowOrchestrator", "StepHostError"]

_ENVIRONMENT_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9-]{0,31}$")
_EMPTY_TOKEN_LIST = json.dumps({"tokens": []})


class StepHostError(ValueError):
    """The step hosts of a deployment contradict each other (two defaults, one workflow twice)."""


class RelayflowOrchestrator(Construct):
    """A complete relayflow deployment.

    Creates the runs and manifests tables, the payload bucket, the api, drive, sweeper and
    worker functions, the HTTP API, the run-alarm schedule group with its role and
    dead-letter queue, the sweeper schedule, alarms and outputs.

    Example:
        ```python
        RelayflowOrchestrator(stack, "Relayflow", RelayflowOrchestratorProps(
            environment_name="prod",
            step_hosts=(InlineStepHost(module="myapp.workflows"),),
        ))
        ```
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        props: RelayflowOrchestratorProps | None = None,
    ) -> None:
        """Create the deployment described by `props` (defaults: see the props)."""
        super().__init__(scope, construct_id)
        self.props = props = props or RelayflowOrchestratorProps()
        if not _ENVIRONMENT_NAME.match(props.environment_name):
            raise ValueError(
                "environment_name must start with a letter and hold up to 32 letters, digits "
                f"or hyphens, got {props.environment_name!r}"
            )
        _check_step_hosts(props.step_hosts)
        if props.http_checkpoints and not any(
            isinstance(h, HttpStepHost) for h in props.step_hosts
        ):
            raise StepHostError("http_checkpoints needs an HttpStepHost")
        if props.code is None:
            _check_bundled_modules(props.step_hosts, props.handlers, props.bundle)
        stack = Stack.of(self)
        Tags.of(self).add("relayflow:environment", props.environment_name)

        self.storage = RelayflowStorage(
            self,
            "Storage",
            removal_policy=props.removal_policy,
            payload_expiration=(
                Duration.days(props.payload_expiration_days)
                if props.payload_expiration_days is not None
                else None
            ),
        )
        self.function_names = names = {
            name: relayflow_function_name(self, name) for name in ("api", "drive", "sweeper")
        }
        self.function_arns = {name: function_arn(stack, n) for name, n in names.items()}
        # Alarms and hand-offs reach the drive function through its alias: the version
        # deployed last (a run pinned to an older one is handed to that version by the engine).
        self.drive_function_arn = f"{self.function_arns['drive']}:{ALIAS_NAME}"
        self.scheduling = RelayflowScheduling(
            self,
            "Scheduling",
            drive_function_arn=self.drive_function_arn,
            removal_policy=props.removal_policy,
        )
        self.functions = RelayflowFunctions(
            self,
            "Functions",
            code=props.code or lambda_code(self._bundle(), build_now=stack.bundling_required),
            architecture=props.architecture,
            memory_size=props.memory_size,
            sweeper_memory_size=props.sweeper_memory_size,
            log_retention=props.log_retention,
            removal_policy=props.removal_policy,
            names=names,
            failure_queue=self.scheduling.dead_letter_queue,
            handlers=props.handlers,
        )
        self.scheduling.add_sweeper_schedule(
            self.functions.aliases["sweeper"], props.sweeper_interval
        )
        self.timers = RelayflowTimers(
            self,
            "Timers",
            dead_letter_queue=self.scheduling.dead_letter_queue,
            drive_timeout=self.functions.drive.timeout or Duration.minutes(15),
            removal_policy=props.removal_policy,
        )
        self.timers.consume_with(self.functions.aliases["drive"])
        self.tokens_secret = self._tokens_secret() if props.api_auth is ApiAuthMode.BEARER else None
        self.http_api = RelayflowHttpApi(
            self,
            "Api",
            handler=self.functions.aliases["api"],
            api_name=f"relayflow-{props.environment_name}",
            auth=props.api_auth,
            cors=props.cors,
            throttle_rate=props.api_throttle_rate,
            throttle_burst=props.api_throttle_burst,
            log_retention=props.log_retention,
            removal_policy=props.removal_policy,
        )
        self._configure_engine_functions()
        self._configure_api_function()
        self._configure_worker_function()
        self._configure_version_cleanup()
        self.monitoring = RelayflowMonitoring(
            self,
            "Monitoring",
            functions=self.functions.functions,
            dead_letter_queue=self.scheduling.dead_letter_queue,
            http_api=self.http_api.http_api,
            alarm_email=props.alarm_email,
            alarm_topic=props.alarm_topic,
        )
        self.dashboard = (
            RelayflowDashboard(
                self,
                "Dashboard",
                environment_name=props.environment_name,
                functions=self.functions.functions,
                runs_table=self.storage.runs_table,
                alarm_queue=self.timers.alarm_queue,
                dead_letter_queue=self.scheduling.dead_letter_queue,
            )
            if props.dashboard
            else None
        )
        self._acknowledge_findings()
        self._outputs()

    # ---- wiring -------------------------------------------------------------------------------

    def _bundle(self) -> LambdaBundle:
        x86 = self.props.architecture.name == lambda_.Architecture.X86_64.name
        return dataclasses.replace(self.props.bundle, architecture="x86_64" if x86 else "arm64")

    def _tokens_secret(self) -> secretsmanager.Secret:
        return secretsmanager.Secret(
            self,
            "ApiTokens",
            description=(
                "relayflow API bearer tokens, as SHA-256 digests: "
                '{"tokens": [{"sha256": "<hex>", "name": "...", "scopes": ["*"]}]}'
            ),
            # An empty list refuses every request until the operator adds a token digest.
            secret_string_value=SecretValue.unsafe_plain_text(_EMPTY_TOKEN_LIST),
            removal_policy=self.props.removal_policy,
        )

    @property
    def engine_functions(self) -> tuple[lambda_.Function, ...]:
        """The functions that drive runs (api, drive, sweeper): they share one configuration."""
        return (self.functions.api, self.functions.drive, self.functions.sweeper)

    def _engine_environment(self) -> dict[str, str]:
        storage, scheduling = self.storage, self.scheduling
        env = {
            config.ENV_TABLE_NAME: storage.runs_table.table_name,
            config.ENV_MANIFESTS_TABLE: storage.manifests_table.table_name,
            config.ENV_MANIFESTS_BUCKET: storage.manifests_bucket.bucket_name,
            config.ENV_PAYLOAD_BUCKET: storage.payload_bucket.bucket_name,
            config.ENV_SCHEDULE_GROUP: scheduling.schedule_group_name,
            config.ENV_SCHEDULER_ROLE_ARN: scheduling.alarm_role.role_arn,
            config.ENV_DRIVE_FUNCTION_ARN: self.drive_function_arn,
            config.ENV_DLQ_ARN: scheduling.dead_letter_queue.queue_arn,
            config.ENV_ALARM_QUEUE_URL: self.timers.alarm_queue.queue_url,
            config.ENV_RECURRING_SCHEDULE_GROUP: self.timers.schedule_group_name,
            config.ENV_RETENTION_DAYS: str(self.props.run_retention_days),
            config.ENV_DEPLOYMENT_NAME: self.props.environment_name,
        }
        env.update(self._dispatch_environment())
        return env

    def _dispatch_environment(self) -> dict[str, str]:
        env: dict[str, str] = {}
        mapping: dict[str, str] = {}
        default: StepHost = InlineStepHost()
        for host in self.props.step_hosts:
            if not host.workflows:
                default = host
            for workflow in host.workflows:
                mapping[workflow] = self._dispatch_value(host)
            if isinstance(host, HttpStepHost):
                # Resolved by CloudFormation at deploy time (a dynamic reference), so the
                # template never holds the secret.
                env[config.ENV_SIGNING_SECRET] = host.signing_secret.secret_value.unsafe_unwrap()
                env[config.ENV_SIGNING_MODE] = host.signing_mode
        inline = [h for h in (*self.props.step_hosts, default) if isinstance(h, InlineStepHost)]
        modules = list(dict.fromkeys(h.module for h in inline))
        kind, _, target = self._dispatch_value(default).partition(":")
        env[config.ENV_DISPATCHER] = kind
        if kind == "lambda":
            env[config.ENV_DISPATCH_FUNCTION] = target
        elif kind == "http":
            env[config.ENV_DISPATCH_URL] = target
        if mapping:
            env[config.ENV_DISPATCH_MAP] = Stack.of(self).to_json_string(mapping)
        if modules:
            env[config.ENV_WORKFLOW_MODULES] = ",".join(modules)
        if self.props.http_checkpoints:
            env[config.ENV_HTTP_CHECKPOINT_URL] = self.http_api.url
        return env

    def _dispatch_value(self, host: StepHost) -> str:
        if isinstance(host, InlineStepHost):
            return "inline"
        if isinstance(host, WorkerStepHost):
            return f"lambda:{self.functions.aliases['worker'].function_arn}"
        if isinstance(host, LambdaStepHost):
            return f"lambda:{host.function.function_arn}"
        return f"http:{host.url}"

    def _step_host_functions(self) -> list[lambda_.IFunction]:
        hosts: list[lambda_.IFunction] = []
        for host in self.props.step_hosts:
            if isinstance(host, WorkerStepHost):
                hosts.append(self.functions.worker)
            elif isinstance(host, LambdaStepHost):
                hosts.append(host.function)
        return hosts

    def _configure_engine_functions(self) -> None:
        env = self._engine_environment()
        storage = self.storage
        invoke_targets = self._invoke_targets()
        for function in self.engine_functions:
            for name, value in env.items():
                function.add_environment(name, value)
            role = _role_of(function)
            storage.runs_table.grant_read_write_data(role)
            storage.manifests_table.grant_read_write_data(role)
            role.add_to_principal_policy(
                iam.PolicyStatement(
                    actions=["s3:GetObject", "s3:PutObject", "s3:DeleteObject"],
                    resources=[storage.payload_bucket.arn_for_objects("*")],
                )
            )
            role.add_to_principal_policy(
                iam.PolicyStatement(
                    actions=[
                        "scheduler:CreateSchedule",
                        "scheduler:UpdateSchedule",
                        "scheduler:DeleteSchedule",
                        "scheduler:GetSchedule",
                    ],
                    resources=[
                        self.scheduling.schedule_arn_pattern(),
                        self.timers.schedule_arn_pattern(),
                    ],
                )
            )
            # Reconciling recurring schedules lists the group; ListSchedules takes no resource.
            role.add_to_principal_policy(
                iam.PolicyStatement(actions=["scheduler:ListSchedules"], resources=["*"])
            )
            self.timers.alarm_queue.grant_send_messages(role)
            role.add_to_principal_policy(
                iam.PolicyStatement(
                    actions=["iam:PassRole"],
                    resources=[self.scheduling.alarm_role.role_arn],
                    conditions={"StringEquals": {"iam:PassedToService": "scheduler.amazonaws.com"}},
                )
            )
            role.add_to_principal_policy(
                iam.PolicyStatement(
                    actions=["lambda:InvokeFunction"], resources=sorted(set(invoke_targets))
                )
            )
        # A run that checkpoints many times hands itself to the drive function again and
        # again; that chain is intended, and the per-run operations limit bounds it.
        drive = self.functions.drive.node.default_child
        assert isinstance(drive, lambda_.CfnFunction)
        drive.recursive_loop = "Allow"

    def _invoke_targets(self) -> list[str]:
        """What the engine functions invoke: any version of the api, drive, sweeper and worker
        functions (`<arn>:*`; the `live` alias, and the version a pinned run started on: each
        of them runs workflow bodies, so a run can be pinned to any), and the step host
        functions of others, unqualified."""
        targets = [f"{arn}:*" for arn in self.function_arns.values()]
        for host in self.props.step_hosts:
            if isinstance(host, WorkerStepHost):
                targets.append(f"{self.functions.worker.function_arn}:*")
            elif isinstance(host, LambdaStepHost):
                targets.append(host.function.function_arn)
        return targets

    def _configure_version_cleanup(self) -> None:
        """The sweeper deletes the old versions of the four functions that no run needs:
        it may list their versions and aliases and delete versions, never a function."""
        sweeper = self.functions.sweeper
        functions = [*self.function_arns.values(), self.functions.worker.function_arn]
        sweeper.add_environment(
            config.ENV_VERSIONED_FUNCTIONS,
            ",".join([*self.function_names.values(), self.functions.worker.function_name]),
        )
        sweeper.add_environment(
            config.ENV_VERSION_RETENTION_DAYS, str(self.props.version_retention_days)
        )
        role = _role_of(sweeper)
        role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["lambda:ListVersionsByFunction", "lambda:ListAliases"],
                resources=functions,
            )
        )
        # Qualified ARNs only: a version can be deleted, the function itself cannot.
        role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["lambda:DeleteFunction"], resources=[f"{arn}:*" for arn in functions]
            )
        )

    def _configure_api_function(self) -> None:
        api = self.functions.api
        props = self.props
        api.add_environment(api_settings.ENV_API_AUTH, props.api_auth.value)
        api.add_environment(
            config.ENV_INLINE_DRIVE_BUDGET, str(int(props.inline_drive_budget.to_milliseconds()))
        )
        if self.tokens_secret is not None:
            api.add_environment(api_settings.ENV_API_TOKENS_SECRET, self.tokens_secret.secret_arn)
            self.tokens_secret.grant_read(_role_of(api))
        if props.cors is not None:
            api.add_environment(
                api_settings.ENV_API_CORS_ORIGINS, ",".join(props.cors.allow_origins)
            )

    def _configure_worker_function(self) -> None:
        worker = self.functions.worker
        storage = self.storage
        worker.add_environment(config.ENV_PAYLOAD_BUCKET, storage.payload_bucket.bucket_name)
        hosted = [h.module for h in self.props.step_hosts if isinstance(h, WorkerStepHost)]
        # Without a worker step host the worker is idle; it imports what the inline hosts do.
        modules = hosted or _hosted_modules(self.props.step_hosts)
        worker.add_environment(config.ENV_WORKFLOW_MODULES, ",".join(dict.fromkeys(modules)))
        _role_of(worker).add_to_principal_policy(
            iam.PolicyStatement(
                actions=["s3:GetObject", "s3:PutObject"],
                resources=[storage.payload_bucket.arn_for_objects(f"{PAYLOAD_PREFIX}*")],
            )
        )
        # Per-step checkpoints: the host appends each completed step to the run's write-once
        # log (a conditional PutItem); it reads nothing and changes no run header.
        worker.add_environment(config.ENV_CHECKPOINT_TABLE, storage.runs_table.table_name)
        _role_of(worker).add_to_principal_policy(
            iam.PolicyStatement(
                actions=["dynamodb:PutItem"], resources=[storage.runs_table.table_arn]
            )
        )
        # Step rate limits: a reservation reads its key's item and writes it back
        # conditionally (the PutItem above); reads are limited to those items.
        _role_of(worker).add_to_principal_policy(
            iam.PolicyStatement(
                actions=["dynamodb:GetItem"],
                resources=[storage.runs_table.table_arn],
                conditions={
                    "ForAllValues:StringLike": {
                        "dynamodb:LeadingKeys": [f"{RATE_LIMIT_PARTITION_PREFIX}*"]
                    }
                },
            )
        )

    # ---- findings and outputs ----------------------------------------------------------------

    def _acknowledge_findings(self) -> None:
        storage = self.storage
        group = Stack.of(self).resolve(self.scheduling.schedule_group_name)
        for function in self.engine_functions:
            policy = _role_of(function).node.try_find_child("DefaultPolicy")
            assert policy is not None
            for resource, definition in (
                (storage.runs_table, tables.RUNS_TABLE),
                (storage.manifests_table, tables.MANIFESTS_TABLE),
            ):
                if not definition.get("GlobalSecondaryIndexes"):
                    continue
                acknowledge(
                    policy,
                    f"AwsSolutions-IAM5[Resource::<{_logical_id(resource)}.Arn>/index/*]",
                    "Queries the table's global secondary indexes (run listings, wake times); "
                    "the actions are listed one by one.",
                )
            acknowledge(
                policy,
                f"AwsSolutions-IAM5[Resource::<{_logical_id(storage.payload_bucket)}.Arn>/*]",
                "Payload and manifest objects are named by content hash at run time; only "
                "Get/Put/DeleteObject are allowed, on this one bucket.",
            )
            acknowledge(
                policy,
                "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:scheduler:<AWS::Region>:"
                f"<AWS::AccountId>:schedule/{group}/*]",
                "Run alarms are one-time schedules named after each run, created at run time in "
                "this deployment's own schedule group only.",
            )
            recurring = Stack.of(self).resolve(self.timers.schedule_group_name)
            acknowledge(
                policy,
                "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:scheduler:<AWS::Region>:"
                f"<AWS::AccountId>:schedule/{recurring}/*]",
                "Recurring schedules are named from the workflows' declarations when a manifest "
                "is registered, in this deployment's own recurring-schedule group only.",
            )
            acknowledge(
                policy,
                "AwsSolutions-IAM5[Resource::*]",
                "scheduler:ListSchedules supports no resource-level permission; it is the only "
                "action granted on '*' and reveals schedule names only.",
            )
            self._acknowledge_versions(policy)
        worker_policy = _role_of(self.functions.worker).node.try_find_child("DefaultPolicy")
        assert worker_policy is not None
        acknowledge(
            worker_policy,
            f"AwsSolutions-IAM5[Resource::<{_logical_id(storage.payload_bucket)}.Arn>/"
            f"{PAYLOAD_PREFIX}*]",
            "Payload objects are named by content hash at run time; only Get/PutObject under "
            "the payload prefix are allowed.",
        )
        for function in self.functions.functions.values():
            acknowledge(
                function,
                "AwsSolutions-L1",
                "Pinned to Python 3.12 on purpose: the bundle's native wheels are built for "
                "cp312 and the runtime is supported; upgrading is a deliberate change.",
            )
        if self.tokens_secret is not None:
            acknowledge(
                self.tokens_secret,
                "AwsSolutions-SMG4",
                "Holds SHA-256 digests of API tokens that operators issue; rotating means "
                "issuing new tokens and replacing the digests, which no rotation Lambda can do.",
            )

    def _acknowledge_versions(self, policy: IConstruct) -> None:
        """`<function arn>:*` names the versions and the alias of one of our functions."""
        reason = (
            "Any version of this deployment's own function: a pinned run is sent to the "
            "version it started on (and the sweeper deletes versions no run needs); only "
            "that function's versions and its alias match."
        )
        for name in self.function_names.values():
            acknowledge(
                policy,
                "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:lambda:<AWS::Region>:"
                f"<AWS::AccountId>:function:{name}:*]",
                reason,
            )
        acknowledge(
            policy,
            f"AwsSolutions-IAM5[Resource::<{_logical_id(self.functions.worker)}.Arn>:*]",
            reason,
        )

    def _outputs(self) -> None:
        # Stable output keys (`<construct id>ApiUrl`, ...) so scripts can look them up.
        prefix = re.sub(r"[^A-Za-z0-9]", "", self.node.id)
        outputs = {
            "ApiUrl": (self.http_api.url, "relayflow HTTP API URL"),
            "RunsTableName": (self.storage.runs_table.table_name, "DynamoDB table of runs"),
            "DriveFunctionName": (
                self.functions.drive.function_name,
                "Function that run alarms invoke",
            ),
            "AlarmQueueUrl": (
                self.timers.alarm_queue.queue_url,
                "Wake-ups less than 15 minutes ahead, consumed by the drive function",
            ),
            "DeadLetterQueueUrl": (
                self.scheduling.dead_letter_queue.queue_url,
                "Undeliverable alarms and failed asynchronous drives",
            ),
        }
        if self.tokens_secret is not None:
            outputs["ApiTokensSecretName"] = (
                self.tokens_secret.secret_name,
                "Secrets Manager secret holding the API token digests",
            )
        for name, (value, description) in outputs.items():
            output = CfnOutput(self, name, value=value, description=description)
            output.override_logical_id(f"{prefix}{name}")


def _role_of(function: lambda_.Function) -> iam.Role:
    role = function.role
    assert isinstance(role, iam.Role)
    return role


def _logical_id(construct: Construct) -> str:
    child = construct.node.default_child
    assert child is not None
    return Stack.of(construct).resolve(child.logical_id)  # type: ignore[attr-defined,no-any-return]


def _check_step_hosts(hosts: tuple[StepHost, ...]) -> None:
    defaults = [h for h in hosts if not h.workflows]
    if len(defaults) > 1:
        raise StepHostError("at most one step host may be the default (have no workflows)")
    seen: set[str] = set()
    for host in hosts:
        for workflow in host.workflows:
            if workflow in seen:
                raise StepHostError(f"workflow {workflow!r} is routed to two step hosts")
            seen.add(workflow)
    secrets = {id(h.signing_secret) for h in hosts if isinstance(h, HttpStepHost)}
    modes = {h.signing_mode for h in hosts if isinstance(h, HttpStepHost)}
    if len(secrets) > 1 or len(modes) > 1:
        raise StepHostError("all HTTP step hosts of a deployment share one signing secret and mode")


def _hosted_modules(hosts: tuple[StepHost, ...]) -> list[str]:
    inline_or_worker = [h for h in hosts if isinstance(h, InlineStepHost | WorkerStepHost)]
    if not any(not h.workflows for h in hosts):
        inline_or_worker.append(InlineStepHost())  # the implicit default host
    return [m.strip() for h in inline_or_worker for m in h.module.split(",") if m.strip()]


def _check_bundled_modules(
    hosts: tuple[StepHost, ...], handlers: FunctionHandlers, bundle: LambdaBundle
) -> None:
    # A module that is not in the bundle would only fail in Lambda, at the first request.
    if bundle.requirements:
        return  # an installed requirement may provide it; pip decides at bundling time
    bundled = bundle.top_level_names() | {"relayflow"}
    named = [("step host", m) for m in _hosted_modules(hosts)]
    named += [("handler", m) for m in handlers.custom_modules()]
    for what, module in named:
        if module.partition(".")[0] not in bundled:
            raise BundleError(
                f"{what} module {module!r} is not in the Lambda bundle: pass its folder as "
                "LambdaBundle(workflow_paths=(Path('path/to/"
                f"{module.partition('.')[0]}'),)) or its distribution as "
                "LambdaBundle(requirements=(...)) in RelayflowOrchestratorProps(bundle=...)"
            )
