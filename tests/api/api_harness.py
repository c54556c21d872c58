"""Fixtures of the API tests: test workflows, the API over the in-memory driver, tokens."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from apigw import Answer, FakeLambdaContext, decode, http_event

from relayflow.api.app import RelayflowResolver, create_app
from relayflow.api.auth import StaticTokenAuth
from relayflow.api.context import WaitPolicy
from relayflow.api.metrics import RecordingMetrics
from relayflow.testing import WorkflowTestEnv

ADMIN = "admin-token"
READER = "reader-token"
WRITER = "writer-token"
INGESTER = "ingest-token"
PUBLISHER = "manifest-token"

TOKENS: list[str | tuple[str, list[str]]] = [
    ADMIN,
    (READER, ["runs:read"]),
    (WRITER, ["runs:write"]),
    (INGESTER, ["events:write"]),
    (PUBLISHER, ["manifests:write"]),
]

RELEASED: list[str] = []


def reserve(order: dict[str, Any]) -> dict[str, Any]:
    return {"reservation": f"res-{order['id']}"}


def release(reservation: dict[str, Any]) -> dict[str, Any]:
    RELEASED.append(reservation["reservation"])
    return {"released": reservation["reservation"]}


def once(value: Any) -> Any:
    return value


def _define_workflows() -> list[Any]:
    from relayflow.errors import FatalError
    from relayflow.sdk.registry import workflow

    @workflow(id="api.echo")
    async def echo(data: Any, ctx: Any) -> Any:
        return {"echo": data}

    @workflow(id="api.fails")
    async def fails(data: Any, ctx: Any) -> Any:
        raise FatalError("it broke", code="BROKEN")

    @workflow(id="api.ship")
    async def ship(order: dict[str, Any], ctx: Any) -> Any:
        await ctx.sleep("10m")
        shipment = await ctx.wait_for_event("order.shipped", match={"orderId": order["id"]})
        return {"order": order["id"], "shipment": shipment}

    @workflow(id="api.signal")
    async def signal(data: Any, ctx: Any) -> Any:
        return {"go": await ctx.wait_for_signal("go")}

    @workflow(id="api.approval")
    async def approval(data: Any, ctx: Any) -> Any:
        token = await ctx.wait_for_token(token_id="approve-1", heartbeat_timeout="1h")
        return {"decision": await token.wait()}

    @workflow(id="api.callback")
    async def callback(data: Any, ctx: Any) -> Any:
        token = await ctx.wait_for_token(name="manager")
        ctx.metadata.set("token", token.token_id)
        return {"decision": await token.wait()}

    @workflow(id="api.saga")
    async def saga(order: dict[str, Any], ctx: Any) -> Any:
        await ctx.step("reserve", reserve, order, compensate=release)
        return await ctx.wait_for_event("never.happens")

    @workflow(id="api.careful", checkpoint="batched")
    async def careful(data: Any, ctx: Any) -> Any:
        # Batched, each at-most-once step checkpoints before it runs: one invocation per step.
        first = await ctx.step("one", once, 1, semantics="at_most_once")
        second = await ctx.step("two", once, 2, semantics="at_most_once")
        return first + second

    return [echo, fails, ship, signal, approval, callback, saga, careful]


@pytest.fixture(scope="session")
def workflows() -> list[Any]:
    return _define_workflows()


@dataclass
class Api:
    """The API over one in-memory environment, called with synthetic API Gateway events."""

    app: RelayflowResolver
    env: WorkflowTestEnv
    metrics: RecordingMetrics
    context: FakeLambdaContext
    handler: Callable[[Any, Any], Any] | None = None

    def call(self, method: str, path: str, *, token: str | None = ADMIN, **kwargs: Any) -> Answer:
        event = http_event(method, path, token=token, **kwargs)
        target = self.handler or self.app.resolve
        return decode(target(event, self.context))

    def get(self, path: str, **kwargs: Any) -> Answer:
        return self.call("GET", path, **kwargs)

    def post(self, path: str, body: Any = None, **kwargs: Any) -> Answer:
        return self.call("POST", path, body=body, **kwargs)


def make_api(env: WorkflowTestEnv, **options: Any) -> Api:
    metrics = RecordingMetrics()

    def sleep_ms(ms: float) -> None:
        env.advance(int(ms))

    wait = options.pop("wait", None) or WaitPolicy(
        monotonic_ms=lambda: float(env.now()), sleep_ms=sleep_ms
    )
    app = create_app(
        env.driver,
        env.admin,
        auth=options.pop("auth", None) or StaticTokenAuth(TOKENS),
        metrics=metrics,
        wait=wait,
        **options,
    )
    return Api(app=app, env=env, metrics=metrics, context=FakeLambdaContext())


@pytest.fixture
def env(workflows: list[Any]) -> WorkflowTestEnv:
    return WorkflowTestEnv(workflows=workflows)


@pytest.fixture
def api(env: WorkflowTestEnv) -> Iterator[Api]:
    RELEASED.clear()
    yield make_api(env)
