"""Throttling and 5xx answers from DynamoDB, Scheduler, S3, Lambda and HTTP step hosts are
retried with backoff; no run is lost or failed by a transient error.

The AWS errors are injected in both modes (see ``fault_injection``): ``refused`` (the service
never applied the request) and ``applied`` (it did, and the answer was lost), so each retry
also meets the state its own first attempt left."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import requests
from fault_injection import FAULT_MODES, FaultMode, RecordingSleep
from reliability_cluster import SETTINGS, Cluster, Outcome
from reliability_hosts import LambdaService, WsgiHostAdapter, http_session, step_handler
from reliability_saga import run_saga
from reliability_tally import add
from reliability_workflows import LEDGER

from relayflow.adapters.aws.clients import AwsClients
from relayflow.adapters.aws.payloads import S3PayloadStore
from relayflow.dispatch.http_dispatcher import HttpDispatcher, TransportRetry
from relayflow.dispatch.lambda_dispatcher import LambdaDispatcher
from relayflow.dispatch.signing import RequestSigner
from relayflow.ports import DispatcherResolver
from relayflow.testing import WorkflowTestEnv
from relayflow.worker.hosts import StepHost

SECRET = "reliability-signing-secret"


@pytest.fixture(scope="module")
def fault_free(module_cluster: Cluster) -> Outcome:
    module_cluster.reset()
    outcome = run_saga(module_cluster, "o-1")
    module_cluster.reset()
    return outcome


BOTO_RETRIED = [
    ("dynamodb:PutItem", "ProvisionedThroughputExceededException", 400),
    ("dynamodb:PutItem", "ThrottlingException", 400),
    ("dynamodb:Query", "InternalServerError", 500),
    ("dynamodb:Query", "ServiceUnavailable", 503),
    ("scheduler:CreateSchedule", "ThrottlingException", 429),
    ("scheduler:DeleteSchedule", "InternalServerException", 500),
]


def count_faults(injected: int, mode: FaultMode) -> None:
    add("transient_faults", injected)
    add(f"transient_faults_{mode}", injected)


@pytest.mark.parametrize("mode", FAULT_MODES)
@pytest.mark.parametrize(("operation", "code", "status"), BOTO_RETRIED)
def test_a_short_burst_is_absorbed_by_botocore_retries_with_backoff(
    cluster: Cluster,
    fault_free: Outcome,
    backoff: RecordingSleep,
    operation: str,
    code: str,
    status: int,
    mode: FaultMode,
) -> None:
    burst = cluster.injector.burst(operation, code, status, count=3, mode=mode)
    LEDGER.reset()

    outcome = run_saga(cluster, "o-1")

    count_faults(burst.injected, mode)
    assert burst.injected == 3
    assert outcome == fault_free
    assert cluster.failed_invocations == 0
    assert len(backoff.delays) >= 3
    assert all(delay >= 0 for delay in backoff.delays)
    assert max(LEDGER.counts().values()) == 1


@pytest.mark.parametrize("mode", FAULT_MODES)
@pytest.mark.parametrize(
    ("operation", "code", "status"),
    [
        ("dynamodb:PutItem", "ThrottlingException", 400),
        ("dynamodb:Query", "InternalServerError", 500),
        ("scheduler:CreateSchedule", "ThrottlingException", 429),
    ],
)
def test_an_outage_longer_than_the_retries_fails_requests_but_loses_no_run(
    cluster: Cluster,
    fault_free: Outcome,
    backoff: RecordingSleep,
    operation: str,
    code: str,
    status: int,
    mode: FaultMode,
) -> None:
    # Five attempts per call (max_attempts=4 retries): six errors fail a whole request.
    burst = cluster.injector.burst(operation, code, status, count=6, mode=mode)

    outcome = run_saga(cluster, "o-1")

    count_faults(burst.injected, mode)
    assert burst.injected >= 5
    assert cluster.failed_invocations >= 1
    assert outcome == fault_free


@pytest.mark.parametrize("mode", FAULT_MODES)
@pytest.mark.parametrize(
    ("operation", "code", "status"),
    [("s3:PutObject", "SlowDown", 503), ("s3:GetObject", "InternalError", 500)],
)
def test_payload_store_calls_are_retried(
    cluster: Cluster,
    backoff: RecordingSleep,
    operation: str,
    code: str,
    status: int,
    mode: FaultMode,
) -> None:
    clients = AwsClients(region=SETTINGS.region)
    cluster.injector.install(clients.s3())
    store = S3PayloadStore(SETTINGS.require("payload_bucket"), client_factory=clients.s3)
    burst = cluster.injector.burst(operation, code, status, count=3, mode=mode)
    data = b'{"large": "' + b"x" * 100_000 + b'"}'

    ref = store.put(data)

    assert store.get(ref) == data
    count_faults(burst.injected, mode)
    assert burst.injected == 3
    assert len(backoff.delays) >= 3


# ----- step hosts over Lambda and HTTP ------------------------------------------------------


@pytest.fixture
def env() -> Iterator[WorkflowTestEnv]:
    from reliability_workflows import ALL_WORKFLOWS

    LEDGER.reset()
    yield WorkflowTestEnv(workflows=ALL_WORKFLOWS)


def use_dispatcher(env: WorkflowTestEnv, dispatcher: Any) -> None:
    env.engine.dispatchers = DispatcherResolver(default=dispatcher)


@pytest.fixture
def lambda_client(cluster_backend: None) -> Any:
    return AwsClients(region=SETTINGS.region).lambda_()


@pytest.mark.parametrize(
    "faults",
    [[429, 429], [500, "Unhandled"], [429, 500, 503, 429, "Unhandled", 500, 429]],
    ids=["429", "5xx", "long"],
)
def test_lambda_host_throttling_and_errors_are_retried(
    env: WorkflowTestEnv, lambda_client: Any, backoff: RecordingSleep, faults: list[int | str]
) -> None:
    service = LambdaService(step_handler(env.clock.now_ms))
    service.install(lambda_client)
    service.faults = list(faults)
    sleeps = RecordingSleep()
    use_dispatcher(
        env,
        LambdaDispatcher(
            SETTINGS.require("drive_function_arn"),
            client_factory=lambda: lambda_client,
            retry=TransportRetry(retries=2, sleep=sleeps),
        ),
    )

    run = env.trigger("reliability.sleeper", {})
    env.run_until_idle()

    add("transient_faults", service.injected)
    assert service.injected == len(faults)
    assert env.get_run(run.id).status == "completed"
    assert env.get_run(run.id).output == "woke"
    assert sleeps.delays[0] == 0.2
    assert LEDGER.counts() == {(f"{run.id}:before", 1): 1, (f"{run.id}:after", 1): 1}


def signed_host(env: WorkflowTestEnv) -> StepHost:
    """A step host checking signatures against the virtual clock."""
    signer = RequestSigner(SECRET, clock=lambda: env.clock.now_ms() / 1000)
    return StepHost(handler=step_handler(env.clock.now_ms), signer=signer)


@pytest.mark.parametrize(
    "faults",
    [
        [500, (429, {"Retry-After": "1"})],
        [requests.ConnectionError("refused"), 502],
        [503, 503, 503, requests.Timeout("slow"), 500],
    ],
    ids=["5xx-429", "unreachable", "long"],
)
def test_http_host_outages_are_retried_and_signed_requests_accepted(
    env: WorkflowTestEnv, faults: list[Any]
) -> None:
    adapter = WsgiHostAdapter(signed_host(env), faults)
    sleeps = RecordingSleep()
    use_dispatcher(
        env,
        HttpDispatcher(
            "https://steps.example.test/step",
            secret=SECRET,
            session=http_session(adapter),
            retry=TransportRetry(retries=2, sleep=sleeps),
            clock=lambda: env.clock.now_ms() / 1000,
        ),
    )

    run = env.trigger("reliability.sleeper", {})
    env.run_until_idle()

    add("transient_faults", adapter.injected)
    assert adapter.injected == len(faults)
    assert env.get_run(run.id).status == "completed"
    assert LEDGER.counts() == {(f"{run.id}:before", 1): 1, (f"{run.id}:after", 1): 1}
    assert sleeps.delays[0] == 0.2


def test_a_host_down_for_good_fails_the_run_clearly_after_its_retries(
    env: WorkflowTestEnv,
) -> None:
    adapter = WsgiHostAdapter(signed_host(env), [503] * 100)
    use_dispatcher(
        env,
        HttpDispatcher(
            "https://steps.example.test/step",
            secret=SECRET,
            session=http_session(adapter),
            retry=TransportRetry(retries=2, sleep=RecordingSleep()),
            clock=lambda: env.clock.now_ms() / 1000,
        ),
    )

    run = env.trigger("reliability.sleeper", {})
    env.run_until_idle()

    add("transient_faults", adapter.injected)
    failed = env.get_run(run.id)
    assert failed.status == "failed"
    assert failed.error is not None
    assert failed.error.code == "handler_error"
    assert adapter.injected == 15  # 5 dispatch attempts x 3 transport attempts


def test_the_lambda_client_makes_a_single_attempt_per_dispatch(
    lambda_client: Any, backoff: RecordingSleep
) -> None:
    service = LambdaService(step_handler(lambda: 0))
    service.install(lambda_client)
    service.faults = [500]

    try:
        lambda_client.invoke(FunctionName="step-host", Payload=b"{}")
    except Exception as exc:
        assert "ServiceException" in str(exc)

    assert service.invocations == 1
