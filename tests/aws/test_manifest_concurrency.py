"""Concurrency declared only in the manifest: the AWS driver limits a workflow whose code is
not in its process (a reference TypeScript host's, or another function's), as the API
function must, when runs are triggered through ``POST /api/runs``."""

from __future__ import annotations

from typing import Any

from moto_driver import SETTINGS

from relayflow.adapters.aws import tables
from relayflow.adapters.aws.clients import AwsClients
from relayflow.adapters.aws.wiring import build_aws_driver
from relayflow.api.app import create_app
from relayflow.api.auth import StaticTokenAuth
from relayflow.clock import VirtualClock
from relayflow.events.manifest import build_manifest
from relayflow.flow.declared import MANIFEST_TTL_MS
from relayflow.ports import DispatcherResolver
from tests.api.apigw import FakeLambdaContext, decode, http_event

T0 = 1_767_225_600_000
MINUTE = 60_000
TOKEN = "t"


class RemoteHost:
    """A step host outside the orchestrator's process, answering as a reference host does:
    the body sleeps a minute, then completes with its input."""

    def __init__(self) -> None:
        self.requests: list[str] = []

    def dispatch(self, request: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        self.requests.append(request["runId"])
        journal = request["journal"]
        if "sleep:1" in journal.get("waitpointsResolved", {}):
            return 200, {"status": "completed", "output": request["input"], "journal": journal}
        wait = {
            "clientWaitpointId": "sleep:1",
            "kind": "DATETIME",
            "meta": {"wakeAt": T0 + MINUTE},
            "timeoutMs": MINUTE,
        }
        return 200, {"status": "waiting", "journal": journal, "waitpoints": [wait]}


class Setup:
    def __init__(self, concurrency: dict[str, Any] | None) -> None:
        clients = AwsClients(region="eu-west-1")
        tables.create_resources(clients, SETTINGS)
        self.clock = VirtualClock(T0)
        self.host = RemoteHost()
        self.driver = build_aws_driver(
            SETTINGS,
            clients=clients,
            clock=self.clock,
            dispatchers=DispatcherResolver(default=self.host),
            on_due=lambda run_id, at: None,
        )
        entry: dict[str, Any] = {"id": "ts.sync"}
        if concurrency is not None:
            entry["concurrency"] = concurrency
        manifest = build_manifest(environment="production", workflows=[entry], event_filters=[])
        self.driver.register_manifest("production", manifest)
        self.app = create_app(self.driver, self.driver.admin, auth=StaticTokenAuth([TOKEN]))

    def trigger(self, customer: str) -> dict[str, Any]:
        event = http_event(
            "POST",
            "/api/runs",
            token=TOKEN,
            body={
                "workflowId": "ts.sync",
                "input": {"customer": customer},
                "environment": "production",
            },
        )
        answer = decode(self.app.resolve(event, FakeLambdaContext()))
        assert answer.status in (200, 201, 202), answer.body
        body: dict[str, Any] = answer.body
        return body


def test_a_manifest_only_workflow_with_limit_1_is_limited_per_key(aws: None) -> None:
    setup = Setup({"key": "customer", "limit": 1, "strategy": "queue"})
    first = setup.trigger("acme")
    second = setup.trigger("acme")
    other = setup.trigger("globex")
    assert first["status"] == "waiting"
    assert second["status"] == "queued", "acme's one slot is held by the first run"
    assert other["status"] == "waiting", "another key is not held up"
    assert setup.host.requests == [first["id"], other["id"]], "the queued run was not sent"
    setup.clock.set(T0 + MINUTE)
    setup.driver.engine.drive(first["id"])
    assert setup.driver.admin.get_run(first["id"]).status == "completed"
    # The slot passed on: the queued run holds it, and starts when its hand-off is driven.
    holders = setup.driver.admin.concurrency.key_state(
        "ts.sync", key="acme", environment="production"
    ).holders
    assert [holder.run_id for holder in holders] == [second["id"]]
    assert setup.driver.admin.get_run(second["id"]).status == "queued"
    setup.driver.engine.drive_from_event({"runId": second["id"]})  # as the drive function
    assert setup.host.requests[-1] == second["id"]
    assert setup.driver.admin.get_run(second["id"]).status == "completed"


def test_without_a_declaration_the_same_workflow_is_not_limited(aws: None) -> None:
    setup = Setup(None)
    runs = [setup.trigger("acme") for _ in range(3)]
    assert [run["status"] for run in runs] == ["waiting"] * 3


def test_the_manifest_is_read_once_per_environment_within_its_ttl(aws: None) -> None:
    setup = Setup({"key": "customer", "limit": 5, "strategy": "queue"})
    reads: list[str] = []
    manifests = setup.driver.manifests
    read = manifests.get_current

    def counted(environment: str) -> dict[str, Any] | None:
        reads.append(environment)
        return read(environment)

    manifests.get_current = counted  # type: ignore[method-assign]
    declared = setup.driver.engine._concurrency_of
    assert declared is not None
    for _ in range(10):
        assert declared("ts.sync", "production") is not None
    assert reads == ["production"]
    setup.clock.advance(MANIFEST_TTL_MS)
    assert declared("ts.sync", "production") is not None
    assert reads == ["production", "production"]
