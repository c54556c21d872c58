"""Step-protocol conformance with the reference wire format (reference §2), in both directions.

Each fixture in ``fixtures/`` is a sequence of request/answer pairs written from the
reference's wire format (reference §1 and §2; the reference runtime itself cannot be
installed here). Two checks per fixture:

* **relayflow's orchestrator accepts reference answers**: the answers are fed through the
  real engine and driver by a fixture step host; the requests relayflow sends it must match
  the fixture's requests, and the run must end as the fixture's ``expect`` says.
* **relayflow's host produces reference answers**: relayflow's step host runs each request
  (workflows in ``conformance_workflows.py``) and its answer must match the fixture's.

``only`` limits a fixture to one direction (a reference host's answer to relayflow's cancel
directive is not what relayflow's host answers). The comparison rules are in ``wire.py``.
"""

from __future__ import annotations

import copy
from typing import Any

import conformance_workflows as wf
import pytest
from wire import load_fixtures, mismatches

from relayflow.ports import DispatcherResolver
from relayflow.testing import WorkflowTestEnv
from relayflow.worker import handle_step_request

FIXTURES = load_fixtures()
WORKFLOWS = [
    wf.steps,
    wf.retries,
    wf.fails,
    wf.sleeps,
    wf.event,
    wf.signal,
    wf.token,
    wf.child,
    wf.parent,
    wf.gives_up,
    wf.parent_catches,
    wf.streams,
    wf.metadata,
    wf.saga,
    wf.saga_fails,
]
T0 = 1_700_000_000_000


def _ids(direction: str) -> list[Any]:
    return [
        pytest.param(fx, id=fx["name"]) for fx in FIXTURES if fx.get("only") in (None, direction)
    ]


class FixtureHost:
    """A step host that answers with a fixture's answers, in order per workflow."""

    def __init__(self, fixture: dict[str, Any]) -> None:
        self.queue = list(fixture["exchanges"])
        self.problems: list[str] = []

    def dispatch(self, request: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """Answer with the next exchange of the request's workflow; note request mismatches."""
        for i, exchange in enumerate(self.queue):
            if exchange["request"]["workflowId"] == request["workflowId"]:
                del self.queue[i]
                for problem in mismatches(exchange["request"], request, request=True):
                    self.problems.append(f"request {request['workflowId']}: {problem}")
                return 200, copy.deepcopy(exchange["answer"])
        self.problems.append(f"unexpected request for {request['workflowId']}")
        return 500, {"error": "no_fixture", "message": "no exchange left"}


def _act(env: WorkflowTestEnv, run_id: str, action: dict[str, Any]) -> None:
    if "expectStatus" in action:
        run = env.get_run(run_id)
        assert run.status == action["expectStatus"]
        if "expectPending" in action:
            assert run.pending_waits == action["expectPending"]
    elif "advance" in action:
        env.advance(action["advance"])
    elif "event" in action:
        env.send_event(run_id, action["event"]["type"], action["event"]["payload"])
    elif "signal" in action:
        env.signal(run_id, action["signal"]["name"], action["signal"]["payload"])
    elif "token" in action:
        env.complete_token(action["token"]["id"], action["token"]["payload"], run_id=run_id)
    elif "cancel" in action:
        env.cancel(run_id, **action["cancel"])
    else:
        raise AssertionError(f"unknown fixture action {action!r}")


@pytest.mark.parametrize("fixture", _ids("orchestrator"))
def test_the_orchestrator_accepts_reference_answers(fixture: dict[str, Any]) -> None:
    env = WorkflowTestEnv(workflows=WORKFLOWS, start_ms=T0, environment="production")
    host = FixtureHost(fixture)
    # Every run of this environment talks to the fixture host instead of relayflow's host.
    env.engine.dispatchers = DispatcherResolver(default=host)
    first = fixture["exchanges"][0]["request"]

    run = env.trigger(first["workflowId"], first["input"])
    for action in fixture.get("actions", []):
        _act(env, run.id, action)

    assert host.problems == []
    assert host.queue == [], "every exchange of the fixture was requested"
    _check_expectations(env.get_run(run.id), fixture["expect"])


def _check_expectations(run: Any, expect: dict[str, Any]) -> None:
    assert run.status == expect["status"]
    if "output" in expect:
        assert run.output == expect["output"]
    if "error" in expect:
        assert run.error is not None
        assert mismatches(expect["error"], run.error.to_wire()) == []
    if "metadata" in expect:
        assert run.metadata == expect["metadata"]
    if "streams" in expect:
        assert {k: [c.chunk for c in v] for k, v in run.streams.items()} == expect["streams"]
        assert {k: v[0].encoding for k, v in run.streams.items()} == expect["encodings"]
    if "compensations" in expect:
        assert [c.step_id for c in run.compensations] == expect["compensations"]
    if "compensationSkipped" in expect:
        skipped = run.compensation_skipped
        assert (skipped.code if skipped else None) == expect["compensationSkipped"]


@pytest.mark.parametrize("fixture", _ids("host"))
def test_the_host_produces_reference_answers(fixture: dict[str, Any]) -> None:
    for exchange in fixture["exchanges"]:
        status, answer = handle_step_request(copy.deepcopy(exchange["request"]), now_ms=lambda: T0)

        assert status == 200
        assert mismatches(exchange["answer"], answer) == [], exchange["request"]["workflowId"]


def test_the_fixtures_cover_every_step_protocol_feature() -> None:
    features = {fx["feature"] for fx in FIXTURES}
    assert features == {"steps", "retries", "waits", "streams", "metadata", "child runs", "cancel"}
    kinds = {
        w["kind"]
        for fx in FIXTURES
        for ex in fx["exchanges"]
        for w in ex["answer"].get("waitpoints", [])
    }
    assert kinds == {"DATETIME", "EVENT", "SIGNAL", "MANUAL", "RUN"}
    encodings = {
        c["encoding"]
        for fx in FIXTURES
        for ex in fx["exchanges"]
        for c in ex["answer"]["streamChunks"]
    }
    assert encodings == {"text", "json", "base64"}


@pytest.mark.parametrize(
    ("expected", "actual", "problems"),
    [
        ({"a": 1}, {"a": 1, "extra": 2}, 0),
        ({"a": 1}, {"a": 2}, 1),
        ({"a": True}, {"a": 1}, 1),
        ({"chunk": None}, {}, 0),
        ({"chunk": None}, {"chunk": "x"}, 1),
        ({"at": 5}, {"at": 99}, 0),
        ({"at": 5}, {"at": "5"}, 1),
        ({"l": [1, 2]}, {"l": [1]}, 1),
        ({"a": {"b": 1}}, {}, 1),
    ],
)
def test_the_comparison_rules(expected: Any, actual: Any, problems: int) -> None:
    assert len(mismatches(expected, actual)) == problems
