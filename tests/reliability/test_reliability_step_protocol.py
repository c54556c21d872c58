"""Step hosts that answer garbage: the run fails clearly (``invalid_step_response`` for a 200
that is not a step response) and the engine never crashes or loses the run."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from reliability_tally import add
from reliability_workflows import ALL_WORKFLOWS, LEDGER

from relayflow.ports import DispatcherResolver
from relayflow.testing import WorkflowTestEnv


class ScriptedHost:
    """A dispatcher answering every step request with the same scripted answer."""

    def __init__(self, answer: Any) -> None:
        self.answer = answer
        self.requests: list[dict[str, Any]] = []

    def dispatch(self, request: dict[str, Any]) -> Any:
        self.requests.append(request)
        add("garbage_step_answers")
        if isinstance(self.answer, BaseException):
            raise self.answer
        return self.answer


@pytest.fixture
def env() -> Iterator[WorkflowTestEnv]:
    LEDGER.reset()
    yield WorkflowTestEnv(workflows=ALL_WORKFLOWS)


def answered_by(env: WorkflowTestEnv, answer: Any) -> ScriptedHost:
    host = ScriptedHost(answer)
    env.engine.dispatchers = DispatcherResolver(default=host)
    return host


GARBAGE_200: list[tuple[str, Any]] = [
    ("empty-object", {}),
    ("unknown-status", {"status": "bogus"}),
    ("status-number", {"status": 7}),
    ("journal-string", {"status": "completed", "output": 1, "journal": "not a journal"}),
    ("journal-steps-list", {"status": "completed", "journal": {"stepResults": [1, 2]}}),
    ("waiting-without-waits", {"status": "waiting", "waitpoints": "soon"}),
    ("waiting-bad-wait", {"status": "waiting", "waitpoints": [{"kind": "NAP"}]}),
    ("failed-error-string", {"status": "failed", "error": "it broke"}),
    ("metadata-garbage", {"status": "completed", "metadataUpdates": "all of them"}),
    ("stream-garbage", {"status": "completed", "streamChunks": [None, 3]}),
    ("none-body", None),
    ("list-body", [1, 2, 3]),
    ("string-body", "<html>oops</html>"),
    ("nested-body", {"status": {"status": {"status": "completed"}}}),
]


@pytest.mark.parametrize("answer", [a for _, a in GARBAGE_200], ids=[n for n, _ in GARBAGE_200])
def test_a_200_that_is_not_a_step_response_fails_the_run_with_invalid_step_response(
    env: WorkflowTestEnv, answer: Any
) -> None:
    host = answered_by(env, (200, answer))

    run = env.trigger("reliability.sleeper", {})
    env.run_until_idle()

    failed = env.get_run(run.id)
    add("runs_checked")
    assert failed.status == "failed"
    assert failed.error is not None
    assert failed.error.code == "invalid_step_response"
    assert failed.error.message
    assert len(host.requests) == 1


OTHER_GARBAGE: list[tuple[str, Any]] = [
    ("status-999", (999, {"status": "completed"})),
    ("status-302", (302, {"location": "elsewhere"})),
    ("status-418", (418, {"error": "teapot", "message": "short and stout"})),
    ("status-400-garbage", (400, "nope")),
    ("raises-value-error", ValueError("host exploded")),
    ("raises-recursion", RecursionError("deep")),
]


@pytest.mark.parametrize("answer", [a for _, a in OTHER_GARBAGE], ids=[n for n, _ in OTHER_GARBAGE])
def test_any_other_garbage_fails_the_run_clearly_without_crashing_the_engine(
    env: WorkflowTestEnv, answer: Any
) -> None:
    answered_by(env, answer)

    run = env.trigger("reliability.sleeper", {})
    env.run_until_idle()

    failed = env.get_run(run.id)
    add("runs_checked")
    assert failed.status == "failed"
    assert failed.error is not None
    assert failed.error.code in {"invalid_step_response", "handler_error"}
    assert failed.error.message


def test_garbage_for_one_run_leaves_other_runs_untouched(env: WorkflowTestEnv) -> None:
    good = env.dispatcher
    bad = ScriptedHost((200, {"status": "bogus"}))
    env.engine.dispatchers = DispatcherResolver(
        default=good, by_workflow={"reliability.sleeper": bad}
    )

    broken = env.trigger("reliability.sleeper", {})
    healthy = env.trigger("reliability.once", {"value": 3})
    env.run_until_idle()

    add("runs_checked", 2)
    assert env.get_run(broken.id).status == "failed"
    assert env.get_run(healthy.id).status == "completed"
    assert env.get_run(healthy.id).output == {"value": 3}
