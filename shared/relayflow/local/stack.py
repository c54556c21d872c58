"""The local development stack in one process: moto, the AWS resources, the API on a port,
the drive function fed by a local scheduler, and the app's workflows on a local worker.

Everything runs through the production code paths (the AWS driver on moto, the api, drive
and worker Lambda handlers, signed Lambda dispatch); only what moto cannot play is local:
firing schedules (one-time alarms and recurring schedules), the SQS event source mapping,
and running Lambda functions (in this process, see ``lambda_router``).
"""

from __future__ import annotations

import json
import secrets
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO, cast

import boto3
from aws_lambda_powertools import Logger
from botocore import UNSIGNED
from botocore.config import Config

from relayflow.adapters.aws.checkpoints import DynamoDBCheckpointLog
from relayflow.adapters.aws.clients import AwsClients
from relayflow.adapters.aws.payloads import S3PayloadStore
from relayflow.adapters.aws.rate_limits import DynamoDBRateLimiter
from relayflow.adapters.aws.tables import create_resources
from relayflow.adapters.aws.wiring import build_aws_driver
from relayflow.api.metrics import DiscardedMetrics
from relayflow.cli.app_loader import build_app_manifest, load_app
from relayflow.clock import wall_ms
from relayflow.config import DispatchTarget, Settings, SigningMode
from relayflow.drivers import WorkflowDriver
from relayflow.errors import ValidationError
from relayflow.local.api_first import ApiFirst, is_long_poll
from relayflow.local.code_archive import CodeArchive, archived, live_builds
from relayflow.local.http_adapter import LambdaHttpServer
from relayflow.local.lambda_router import LocalLambdaClient
from relayflow.local.moto_direct import DirectMoto
from relayflow.local.moto_server import DEFAULT_REGION, FAKE_CREDENTIALS, LocalMoto, start_moto
from relayflow.local.queue_poller import LocalQueuePoller
from relayflow.local.recurring_scheduler import LocalRecurringScheduler
from relayflow.local.scheduler import LocalScheduler
from relayflow.local.state import DevState, gate_moto_server
from relayflow.local.transitions_log import TransitionLog
from relayflow.tracing.process import configure_from_environment
from relayflow.worker.builds import host_code_version

if TYPE_CHECKING:
    from mypy_boto3_lambda import LambdaClient

ACCOUNT = "123456789012"
WORKER_FUNCTION = "relayflow-worker"
DRIVE_FUNCTION = "relayflow-drive"
ALARM_QUEUE = "relayflow-alarms"
#: Names of the local resources (a deployment gets its names from CDK).
LOCAL_SETTINGS = Settings(
    table_name="relayflow-runs",
    manifests_table="relayflow-manifests",
    manifests_bucket="relayflow-manifests",
    payload_bucket="relayflow-payloads",
    schedule_group="relayflow-alarms",
    recurring_schedule_group="relayflow-schedules",
    scheduler_role_arn=f"arn:aws:iam::{ACCOUNT}:role/relayflow-scheduler",
    drive_function_arn=f"arn:aws:lambda:{DEFAULT_REGION}:{ACCOUNT}:function:{DRIVE_FUNCTION}",
    dlq_arn=f"arn:aws:sqs:{DEFAULT_REGION}:{ACCOUNT}:relayflow-alarms-dlq",
    # Steps go to the worker function with a signed RequestResponse invoke, as deployed.
    dispatcher=DispatchTarget("lambda", WORKER_FUNCTION),
    region=DEFAULT_REGION,
)
#: How often the local sweeper drives again the runs whose alarm was missed.
SWEEP_INTERVAL_S = 30.0


@dataclass(frozen=True)
class DevOptions:
    """What ``relayflow dev`` was asked for."""

    app: str | None = None
    port: int = 8787
    moto_port: int = 5050
    environment: str = "development"
    token: str | None = None
    host: str = "127.0.0.1"
    #: Where runs, alarms and manifests are kept across restarts; ``None`` keeps nothing.
    state_dir: Path | None = None
    #: Forget the saved state and start empty.
    fresh: bool = False
    #: Step requests go to this step host over HTTP instead of the in-process worker.
    dispatch_url: str | None = None
    signing_secret: str | None = None
    signing_mode: SigningMode = "relayflow"
    #: That step host checkpoints each step through this stack's API (needs the secret).
    http_checkpoints: bool = False


@dataclass
class AppInfo:
    """The hosted app: its module, workflow ids, filter count and registered manifest."""

    module: str | None
    workflow_ids: list[str] = field(default_factory=list)
    filter_count: int = 0
    manifest_version: str | None = None


def _now_ms() -> int:
    return wall_ms()


class DevStack:
    """Starts and stops the local stack.

    Args:
        options: Ports, app module, environment and token.
        log: Receives one line per run transition and other notices.
    """

    def __init__(self, options: DevOptions, log: Callable[[str], None]) -> None:
        self.options = options
        self.token = options.token or f"dev-{secrets.token_urlsafe(18)}"
        self._log = log
        self.settings = _settings_of(options)
        self.state = DevState(options.state_dir) if options.state_dir is not None else None
        #: Backends restored from the state folder (0 when the stack started empty).
        self.restored = 0
        self.app = AppInfo(module=options.app)
        #: Step invocations wait for the API requests being served (one interpreter here).
        self.api_first = ApiFirst()
        self._http: LambdaHttpServer | None = None
        self._moto: LocalMoto | None = None
        self._scheduler: LocalScheduler | None = None
        self._queue: LocalQueuePoller | None = None
        self._recurring: LocalRecurringScheduler | None = None
        self._lambda = LocalLambdaClient(
            {
                WORKER_FUNCTION: self._run_worker,
                DRIVE_FUNCTION: self._run_drive,
            },
            on_error=self._report_error,
        )
        self._worker_handler: Callable[[Any, Any], Any] | None = None
        self._stop = threading.Event()
        self._sweeper: threading.Thread | None = None
        self._api_handler: Callable[[dict[str, Any], Any], Any] | None = None
        self._drive_handler: Callable[[Any, Any], Any] | None = None
        self._sweeper_handler: Callable[[Any, Any], Any] | None = None

    @property
    def url(self) -> str:
        """The API's base URL."""
        assert self._http is not None
        return self._http.url

    @property
    def moto_url(self) -> str:
        """moto's endpoint."""
        assert self._moto is not None
        return self._moto.endpoint_url

    def start(self) -> None:
        """Bring everything up; raises ``PortInUseError`` when a port is taken.

        Raises:
            PortInUseError: The API or moto port is taken.
            AppLoadError: The app module cannot be imported.
        """
        if self.state is not None:
            self.state.open(fresh=self.options.fresh)
            self.state.on_error = self._report_error
        # Bind the API port first so a taken port fails before anything else starts.
        self._http = LambdaHttpServer(
            self._serve_api, host=self.options.host, port=self.options.port,
            function_name="relayflow-api", on_error=self._report_error,
        )  # fmt: skip
        try:
            self._moto = start_moto(self.options.host, self.options.moto_port)
            self._restore_state()
            # Wake-ups under 15 minutes go through a delayed SQS queue, as deployed.
            queue_url = f"{self._moto.endpoint_url}/{ACCOUNT}/{ALARM_QUEUE}"
            self.settings = replace(self.settings, alarm_queue_url=queue_url)
            clients = self._clients(self._moto.endpoint_url)
            create_resources(clients, self.settings)
            self._load_app()
            driver = self._build_driver(clients)
            self._register_manifest(driver)
            self._wire_handlers(driver, clients)
            self._scheduler = LocalScheduler(
                client=clients.scheduler(),
                group=self.settings.require("schedule_group"),
                fire=self._fire_alarm,
                now_ms=_now_ms,
                wait_turn=self.api_first.wait_for_api,
            )
            self._scheduler.start()
            self._queue = LocalQueuePoller(
                client=clients.sqs(),
                queue_url=queue_url,
                deliver=self._deliver_batch,
                wait_turn=self.api_first.wait_for_api,
            )
            self._queue.start()
            self._recurring = LocalRecurringScheduler(
                client=clients.scheduler(),
                group=self.settings.require("recurring_schedule_group"),
                fire=self._fire_schedule,
                now_ms=_now_ms,
                wait_turn=self.api_first.wait_for_api,
            )
            self._recurring.start()
            self._sweeper = threading.Thread(
                target=self._sweep_loop, name="relayflow-sweeper", daemon=True
            )
            self._sweeper.start()
            if self.state is not None:
                self.state.start()
            self._http.start()
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        """Stop serving, firing and sweeping, then stop moto (safe to call twice)."""
        self._stop.set()
        if self._http is not None:
            self._http.stop()
            self._http = None
        if self._scheduler is not None:
            self._scheduler.stop()
            self._scheduler = None
        if self._recurring is not None:
            self._recurring.stop()
            self._recurring = None
        if self._queue is not None:
            self._queue.stop()
            self._queue = None
        if self._sweeper is not None:
            self._sweeper.join(timeout=5)
            self._sweeper = None
        self._lambda.close()
        if self.state is not None:
            try:
                if self._moto is not None:
                    self.state.stop()  # the last snapshot, once nothing writes any more
            finally:
                self.state.close()
        if self._moto is not None:
            self._moto.stop()
            self._moto = None

    # -- building ------------------------------------------------------------------------------

    def _restore_state(self) -> None:
        if self.state is None:
            return
        assert self._moto is not None
        gate_moto_server(self._moto.server, self.state.gate)
        self.restored = self.state.restore()
        saved = self.state.settings()
        # The token survives restarts, so exported RELAYFLOW_TOKEN values keep working.
        if self.options.token is None and isinstance(saved.get("token"), str):
            self.token = saved["token"]
        self.state.save_settings({**saved, "token": self.token})

    def _clients(self, endpoint_url: str) -> AwsClients:
        # Explicit fake credentials: whatever the shell holds, nothing reaches real AWS.
        session = boto3.Session(
            aws_access_key_id=FAKE_CREDENTIALS["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=FAKE_CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
            aws_session_token=FAKE_CREDENTIALS["AWS_SESSION_TOKEN"],
            region_name=DEFAULT_REGION,
        )
        assert self._moto is not None
        DirectMoto(self._moto.server, endpoint_url).attach(session)
        return LocalAwsClients(
            self._lambda, session=session, region=DEFAULT_REGION, endpoint_url=endpoint_url
        )

    def _load_app(self) -> None:
        from relayflow.events import registered_filters
        from relayflow.sdk.registry import registered_workflows

        if self.options.app:
            load_app(self.options.app)
        self.app.workflow_ids = [wf.id for wf in registered_workflows()]
        self.app.filter_count = len(registered_filters())

    def _build_driver(self, clients: AwsClients) -> WorkflowDriver:
        # Without ``on_due``, a run due now is handed to the drive function with an
        # asynchronous invoke, exactly as deployed; the local Lambda client runs it.
        configure_from_environment()
        driver = build_aws_driver(self.settings, clients=clients)
        # The engine reports every insert and save: the console gets one line per transition.
        driver.engine.add_observer(TransitionLog(self._log, _now_ms))
        if self.options.dispatch_url is None:
            # The worker runs in this process: a workflow it does not have is refused at once.
            from relayflow.sdk.registry import find_workflow

            driver.host_catalog = lambda workflow_id: find_workflow(workflow_id) is not None
        if self.state is not None and self.options.app:
            self._keep_builds(driver)
        return driver

    def _keep_builds(self, driver: WorkflowDriver) -> None:
        """Archive this build of the app and send pinned runs of earlier ones to theirs."""
        assert self.state is not None and self.options.app
        archive = CodeArchive(self.state.folder, self.options.app)
        current = host_code_version().build
        archive.keep(current)
        archive.prune({current, *live_builds(driver.engine.runs)})
        driver.engine.dispatchers = archived(driver.engine.dispatchers, archive)

    def _register_manifest(self, driver: WorkflowDriver) -> None:
        if not self.options.app:
            return  # nothing to describe: triggers are checked by the step host alone
        manifest = build_app_manifest(self.options.environment)
        self.app.manifest_version = driver.register_manifest(self.options.environment, manifest)

    def _wire_handlers(self, driver: WorkflowDriver, clients: AwsClients) -> None:
        from relayflow.api.app import create_app
        from relayflow.api.auth import StaticTokenAuth
        from relayflow.api.context import WaitPolicy
        from relayflow.api.handler import make_lambda_handler
        from relayflow.dispatch.capabilities import capability_signer
        from relayflow.drive.handlers import make_drive_handler, make_sweeper_handler
        from relayflow.worker.hosts import checkpointing_handler
        from relayflow.worker.hosts import make_lambda_handler as make_worker_handler

        auth = StaticTokenAuth([self.token])
        # The console shows run transitions; request logs only when something goes wrong.
        quiet = Logger(service="relayflow-api", level="WARNING")
        self._api_handler = make_lambda_handler(
            lambda: create_app(
                driver,
                driver.admin,
                auth=auth,
                metrics=DiscardedMetrics(),
                logger=quiet,
                # As deployed: the api drives nothing, the drive function (run here on the
                # local Lambda client's threads) does, within its budget.
                hand_off=True,
                inline_budget_ms=self.settings.inline_drive_budget_ms,
                checkpoint_capabilities=capability_signer(self.settings),
                # A request waiting for its run to settle lets the run's steps go.
                wait=WaitPolicy(sleep_ms=self.api_first.sleep_ms),
            )
        )
        self._drive_handler = make_drive_handler(
            lambda: driver, metrics=DiscardedMetrics(), settings=lambda: self.settings
        )
        self._sweeper_handler = make_sweeper_handler(lambda: driver, settings=lambda: self.settings)
        payloads = S3PayloadStore(
            self.settings.require("payload_bucket"), client_factory=clients.s3
        )
        # As deployed, the worker function writes each step's checkpoint to the runs table
        # itself (the construct gives it RELAYFLOW_CHECKPOINT_TABLE): runs are durable per step.
        checkpoints = DynamoDBCheckpointLog(
            self.settings.require("table_name"),
            client_factory=clients.dynamodb,
            payload_store=payloads,
        )
        # Its steps' rate limits are reserved in the runs table, as deployed.
        limiter = DynamoDBRateLimiter(
            self.settings.require("table_name"), client_factory=clients.dynamodb
        )
        self._worker_handler = make_worker_handler(
            handler=checkpointing_handler(checkpoints, limiter),
            secret=self.settings.signing_secret,
            mode=self.settings.signing_mode,
            payload_store=payloads,
            payload_cap=self.settings.inline_payload_cap,
        )

    # -- running -------------------------------------------------------------------------------

    def _serve_api(self, event: dict[str, Any], context: Any) -> Any:
        if self._api_handler is None:
            return {
                "statusCode": 503,
                "headers": {"Content-Type": "application/json"},
                "body": '{"error": "unavailable", "message": "the local stack is starting"}',
            }
        if is_long_poll(str(event.get("rawPath", ""))):
            return self._api_handler(event, context)
        with self.api_first.serving_api():
            return self._api_handler(event, context)

    def _run_worker(self, event: Any, context: Any) -> Any:
        assert self._worker_handler is not None
        self.api_first.wait_for_api()
        return self._worker_handler(event, context)

    def _run_drive(self, event: Any, context: Any) -> Any:
        assert self._drive_handler is not None
        self.api_first.wait_for_api()
        return self._drive_handler(event, context)

    def _fire_alarm(self, payload: dict[str, Any]) -> None:
        """Invoke the drive function with a due schedule's input, as Scheduler would."""
        answer = self._lambda.invoke(
            FunctionName=self.settings.require("drive_function_arn"),
            InvocationType="RequestResponse",
            Payload=json.dumps(payload),
        )
        if answer.get("FunctionError"):
            self._log(f"error: alarm of run {payload.get('runId')}: {answer['Payload'].read()!r}")

    def _deliver_batch(self, event: dict[str, Any]) -> Any:
        """Hand an SQS batch of alarms to the drive function, as the event source mapping does."""
        return self._run_drive(event, None)

    def _fire_schedule(self, payload: dict[str, Any]) -> None:
        """Invoke the drive function with a recurring schedule's firing; print what it did."""
        answer = self._lambda.invoke(
            FunctionName=self.settings.require("drive_function_arn"),
            InvocationType="RequestResponse",
            Payload=json.dumps(payload),
        )
        raw = answer["Payload"].read()
        if answer.get("FunctionError"):
            self._log(f"error: schedule {payload.get('scheduleId')}: {raw!r}")
            return
        for item in json.loads(raw or b"{}").get("driven", []):
            self._log(
                f"schedule {item.get('scheduleId')} fired for {item.get('scheduledTime')}: "
                f"{item.get('status')} {item.get('runId') or ''}".rstrip()
            )

    def _sweep_loop(self) -> None:
        if self.restored:
            # Runs whose alarm came due, or whose drive was cut short, while the stack was down.
            self._sweep_once()
        while not self._stop.wait(SWEEP_INTERVAL_S):
            self._sweep_once()

    def _sweep_once(self) -> None:
        try:
            assert self._sweeper_handler is not None
            self._sweeper_handler({}, None)
        except Exception as exc:
            self._report_error(exc)

    def _report_error(self, exc: BaseException) -> None:
        self._log(f"error: {type(exc).__name__}: {exc}")


def _settings_of(options: DevOptions) -> Settings:
    if options.dispatch_url is None:
        return replace(LOCAL_SETTINGS, signing_secret=secrets.token_hex(32))
    if options.http_checkpoints and not options.signing_secret:
        raise ValidationError("--http-checkpoints needs --signing-secret")
    return replace(
        LOCAL_SETTINGS,
        dispatcher=DispatchTarget("http", options.dispatch_url),
        signing_secret=options.signing_secret,
        signing_mode=options.signing_mode,
        http_checkpoint_url=f"http://{options.host}:{options.port}"
        if options.http_checkpoints
        else None,
    )


class LocalAwsClients(AwsClients):
    """The moto-backed clients, except Lambda: functions run in this process."""

    def __init__(self, local_lambda: LocalLambdaClient, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._local_lambda = local_lambda

    def lambda_(self) -> LambdaClient:
        """The in-process Lambda client."""
        return cast("LambdaClient", self._local_lambda)

    def _config(self, service: str) -> Config:
        # DynamoDB calls, most of the stack's, go to moto in this process: moto checks
        # neither signatures nor parameters (it validates requests itself), so the client
        # spends nothing on them.
        config = super()._config(service)
        if service != "dynamodb":
            return config
        return config.merge(Config(signature_version=UNSIGNED, parameter_validation=False))


def console_writer(stream: TextIO | None = None) -> Callable[[str], None]:
    """A thread-safe line writer to ``stream`` (stdout by default)."""
    lock = threading.Lock()
    out = stream or sys.stdout

    def write(line: str) -> None:
        with lock:
            out.write(line + "\n")
            out.flush()

    return write
