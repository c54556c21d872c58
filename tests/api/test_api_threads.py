"""One resolver answers requests from several threads at once (the local server does).

Each test stops one request at a known point, answers a whole other request meanwhile, then
lets the first one finish: the interleaving is forced, so the result does not depend on luck.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from api_harness import ADMIN, TOKENS, Api, make_api
from apigw import FakeLambdaContext, decode, http_event

from relayflow.api.auth import Principal, StaticTokenAuth
from relayflow.errors import WorkflowNotFoundError
from relayflow.testing import WorkflowTestEnv

WAIT_S = 10.0


class Gate:
    """Stops the first caller that asks to be held until :meth:`release`."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.released = threading.Event()

    def hold(self) -> None:
        self.entered.set()
        assert self.released.wait(WAIT_S), "the held request was never released"

    def release(self) -> None:
        self.released.set()


class GatedAuth:
    """Static tokens; a request with ``x-hold: yes`` stops in authentication."""

    def __init__(self, gate: Gate) -> None:
        self._inner = StaticTokenAuth(TOKENS)
        self._gate = gate
        self.openapi_scheme = self._inner.openapi_scheme

    def authenticate(self, headers: Mapping[str, str], context: Mapping[str, Any]) -> Principal:
        principal = self._inner.authenticate(headers, context)
        if headers.get("x-hold") == "yes":
            self._gate.hold()
        return principal


class GatedDriver:
    """The environment's driver; a trigger with input ``"hold"`` stops inside the route,
    then refuses the workflow (the error answer reads the request's event again)."""

    def __init__(self, inner: Any, gate: Gate) -> None:
        self._inner = inner
        self._gate = gate

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def start(self, workflow_id: str, data: Any, **options: Any) -> Any:
        if data == "hold":
            self._gate.hold()
            raise WorkflowNotFoundError(f"workflow {workflow_id} is not registered")
        return self._inner.start(workflow_id, data, **options)


def _in_thread(call: Callable[[], dict[str, Any]]) -> tuple[threading.Thread, list[Any]]:
    out: list[Any] = []
    thread = threading.Thread(target=lambda: out.append(call()), daemon=True)
    thread.start()
    return thread, out


def _answer_while_held(api: Api, gate: Gate, held: dict[str, Any], other: dict[str, Any]) -> Any:
    """Start ``held``, answer ``other`` while it is stopped, then finish ``held``."""
    thread, out = _in_thread(lambda: api.app.resolve(held, FakeLambdaContext()))
    assert gate.entered.wait(WAIT_S)
    other_answer = decode(api.app.resolve(other, FakeLambdaContext()))
    gate.release()
    thread.join(WAIT_S)
    assert out, "the held request did not finish"
    return decode(out[0]), other_answer


def test_a_request_stopped_before_routing_keeps_its_own_body(env: WorkflowTestEnv) -> None:
    gate = Gate()
    api = make_api(env, auth=GatedAuth(gate))
    held = http_event(
        "POST",
        "/api/runs",
        body={"workflowId": "api.echo", "input": {"mine": True}},
        token=ADMIN,
        headers={"x-hold": "yes"},
    )
    other = http_event("POST", "/api/runs", body={"workflowId": ""}, token=ADMIN)

    mine, theirs = _answer_while_held(api, gate, held, other)

    assert theirs.status == 400
    assert mine.status == 201, mine.body
    assert mine.body["input"] == {"mine": True}
    assert mine.body["output"] == {"echo": {"mine": True}}


def test_a_request_stopped_inside_its_route_keeps_its_event(
    env: WorkflowTestEnv,
) -> None:
    gate = Gate()
    api = make_api(GatedEnv(env, gate))
    held = http_event(
        "POST", "/api/runs", body={"workflowId": "api.echo", "input": "hold"}, token=ADMIN
    )
    other = http_event("GET", "/api/runs/run_missing/timeline", token=ADMIN)

    mine, theirs = _answer_while_held(api, gate, held, other)

    assert theirs.status == 404
    assert theirs.body["error"] == "not_found"
    assert theirs.body["requestId"] == other["requestContext"]["requestId"]
    assert mine.status == 404, mine.body
    assert mine.body["error"] == "workflow_not_found"
    assert mine.body["requestId"] == held["requestContext"]["requestId"]


def test_many_threads_each_get_the_answer_to_their_own_request(env: WorkflowTestEnv) -> None:
    api = make_api(env)

    def call(i: int) -> tuple[int, Any]:
        if i % 2:
            event = http_event("POST", "/api/runs", body={"workflowId": ""}, token=ADMIN)
            return 400, decode(api.app.resolve(event, FakeLambdaContext()))
        event = http_event("GET", f"/api/runs/run_missing_{i}", token=ADMIN)
        return 404, decode(api.app.resolve(event, FakeLambdaContext()))

    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(call, range(200)))

    assert [answer.status for _, answer in results] == [status for status, _ in results]


class GatedEnv:
    """``env`` whose driver is gated: what ``make_api`` needs (driver, admin, clock)."""

    def __init__(self, env: WorkflowTestEnv, gate: Gate) -> None:
        self.driver = GatedDriver(env.driver, gate)
        self.admin = env.admin
        self._env = env

    def now(self) -> int:
        return self._env.now()

    def advance(self, ms: int) -> None:
        self._env.advance(ms)
