"""The local stack starts a drive or a step invocation once the API requests being served are
answered."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

from relayflow.local.api_first import MAX_WAIT_S, ApiFirst, is_long_poll
from relayflow.local.polling import PollingThread
from relayflow.local.stack import DevOptions, DevStack


def _waiter(api_first: ApiFirst, results: list[bool]) -> threading.Thread:
    thread = threading.Thread(target=lambda: results.append(api_first.wait_for_api()))
    thread.start()
    return thread


def test_an_invocation_starts_at_once_when_no_api_request_is_served() -> None:
    api_first = ApiFirst(max_wait_s=60)
    started = time.monotonic()

    assert api_first.wait_for_api() is True
    assert time.monotonic() - started < 30


def test_an_invocation_waits_for_the_api_request_being_served() -> None:
    # A wait far longer than the test: only the request's end can let the invocation go.
    api_first = ApiFirst(max_wait_s=60)
    answered = threading.Event()
    results: list[bool] = []

    def request() -> None:
        with api_first.serving_api():
            answered.wait(timeout=30)

    served = threading.Thread(target=request)
    served.start()
    while api_first.serving != 1:
        time.sleep(0.001)
    invocation = _waiter(api_first, results)
    invocation.join(timeout=0.2)
    assert invocation.is_alive() and results == []

    answered.set()
    served.join(timeout=10)
    invocation.join(timeout=10)
    assert results == [True]
    assert api_first.serving == 0


def test_an_invocation_goes_after_the_longest_wait_under_a_steady_stream_of_requests() -> None:
    api_first = ApiFirst(max_wait_s=0.05)
    with api_first.serving_api():
        results: list[bool] = []
        _waiter(api_first, results).join(timeout=10)
    assert results == [False]


def test_a_request_does_not_count_while_it_sleeps_between_reads() -> None:
    # The sleep ends only once the invocation went: a request that kept counting would
    # hold the invocation for the whole 60 s wait and the joins below would time out.
    sleeping, invocation_went = threading.Event(), threading.Event()

    def sleep(seconds: float) -> None:
        sleeping.set()
        invocation_went.wait(30)

    api_first = ApiFirst(max_wait_s=60, sleep=sleep)
    results: list[bool] = []

    def request() -> None:
        with api_first.serving_api():
            api_first.sleep_ms(100)

    served = threading.Thread(target=request)
    served.start()
    assert sleeping.wait(10)
    invocation = threading.Thread(
        target=lambda: (results.append(api_first.wait_for_api()), invocation_went.set())
    )
    invocation.start()
    invocation.join(timeout=10)
    served.join(timeout=10)
    assert results == [True] and invocation_went.is_set()
    assert api_first.serving == 0


def test_a_sleep_outside_an_api_request_changes_no_count() -> None:
    api_first = ApiFirst(sleep=lambda seconds: None)
    api_first.sleep_ms(10)
    assert api_first.serving == 0


def test_a_run_stream_s_long_poll_is_not_counted_as_work() -> None:
    assert is_long_poll("/api/runs/run_1/stream")
    assert not is_long_poll("/api/runs/run_1/events")
    assert not is_long_poll("/api/runs")


def test_the_stack_counts_its_api_calls_and_its_worker_waits_for_them() -> None:
    stack = DevStack(DevOptions(), log=lambda line: None)
    seen: list[tuple[str, int]] = []

    def probe(name: str) -> Any:
        return lambda event, context: seen.append((name, stack.api_first.serving))

    stack._api_handler, stack._worker_handler = probe("api"), probe("worker")
    stack._serve_api({"rawPath": "/api/runs/r/events"}, None)
    stack._serve_api({"rawPath": "/api/runs/r/stream"}, None)
    stack._run_worker({}, None)
    assert seen == [("api", 1), ("api", 0), ("worker", 0)]


def test_the_stack_s_drive_and_worker_start_once_the_api_request_is_answered() -> None:
    stack = DevStack(DevOptions(), log=lambda line: None)
    # A wait far longer than the test: only the request's end can let the invocations go.
    stack.api_first = ApiFirst(max_wait_s=60)
    order: list[str] = []
    answer = threading.Event()

    def api(event: Any, context: Any) -> None:
        answer.wait(timeout=30)
        order.append("api answered")

    stack._api_handler = api
    stack._drive_handler = lambda event, context: order.append("drive")
    stack._worker_handler = lambda event, context: order.append("worker")
    request = threading.Thread(
        target=stack._serve_api, args=({"rawPath": "/api/runs/r/events"}, None)
    )
    request.start()
    while stack.api_first.serving != 1:
        time.sleep(0.01)
    invocations = [
        threading.Thread(target=start, args=({}, None))
        for start in (stack._run_drive, stack._run_worker)
    ]
    for invocation in invocations:
        invocation.start()
    time.sleep(0.2)  # room for an invocation that does not wait to run first
    answer.set()
    for thread in (request, *invocations):
        thread.join(timeout=30)
    assert order[0] == "api answered"
    assert sorted(order[1:]) == ["drive", "worker"]


def test_the_stack_s_pollers_poll_once_the_api_request_is_answered() -> None:
    api_first = ApiFirst(max_wait_s=60)
    polls: list[int] = []
    polled = threading.Event()

    def poll() -> bool:
        polls.append(api_first.serving)
        polled.set()
        return False

    poller = PollingThread("probe", poll, 0.01, wait_turn=api_first.wait_for_api)
    with api_first.serving_api():
        poller.start()
        time.sleep(0.2)  # room for a poll that does not wait to run first
    try:
        assert polled.wait(timeout=30)
    finally:
        poller.stop()
    assert polls and set(polls) == {0}


def test_the_docs_state_how_long_a_step_waits_for_api_requests() -> None:
    page = Path(__file__).resolve().parents[2] / "docs" / "performance.md"
    readme = " ".join(page.read_text().split())
    assert ApiFirst()._max_wait_s == MAX_WAIT_S == 1.0
    assert "for at most one second" in readme
