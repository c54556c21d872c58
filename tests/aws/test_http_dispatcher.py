"""The HTTP dispatcher signs what it sends, retries transient failures and maps answers."""

from __future__ import annotations

import json
from typing import Any

import pytest
import requests
from requests.adapters import BaseAdapter

from relayflow.dispatch.http_dispatcher import HttpDispatcher, TransportRetry, interpret_answer
from relayflow.dispatch.signing import (
    RELAYFLOW_SIGNATURE_HEADER,
    VOYANT_SIGNATURE_HEADER,
    RequestSigner,
    sign_voyant,
)
from relayflow.errors import DispatchError

URL = "https://host.test/__relayflow/step"
REQUEST: dict[str, Any] = {"protocolVersion": 1, "runId": "r1", "input": {"name": "Zoë"}}


class ScriptedAdapter(BaseAdapter):
    """A transport that answers from a script and records every prepared request."""

    def __init__(self, script: list[Any]) -> None:
        super().__init__()
        self.script = list(script)
        self.sent: list[requests.PreparedRequest] = []
        self.timeouts: list[Any] = []

    def send(  # type: ignore[override]
        self, request: requests.PreparedRequest, timeout: Any = None, **_: Any
    ) -> requests.Response:
        self.sent.append(request)
        self.timeouts.append(timeout)
        step = self.script.pop(0)
        if isinstance(step, BaseException):
            raise step
        status, body, headers = step if len(step) == 3 else (*step, {})
        response = requests.Response()
        response.status_code = status
        response._content = body if isinstance(body, bytes) else json.dumps(body).encode()
        response.headers.update(headers)
        response.url = request.url or ""
        response.request = request
        return response

    def close(self) -> None:
        return None


class Sleeps:
    def __init__(self) -> None:
        self.delays: list[float] = []

    def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)


def dispatcher(script: list[Any], **kwargs: Any) -> tuple[HttpDispatcher, ScriptedAdapter, Sleeps]:
    adapter = ScriptedAdapter(script)
    session = requests.Session()
    session.mount("https://", adapter)
    sleeps = Sleeps()
    retry = kwargs.pop("retry", TransportRetry(retries=2, sleep=sleeps))
    return HttpDispatcher(URL, session=session, retry=retry, **kwargs), adapter, sleeps


def test_a_200_answer_is_returned_as_is() -> None:
    answer = {"status": "completed", "output": 3, "journal": {}}
    d, adapter, sleeps = dispatcher([(200, answer)], connect_timeout=1.0, read_timeout=9.0)
    assert d.dispatch(REQUEST) == (200, answer)
    sent = adapter.sent[0]
    assert sent.method == "POST"
    assert sent.url == URL
    assert json.loads(sent.body) == REQUEST  # type: ignore[arg-type]
    assert sent.headers["content-type"] == "application/json; charset=utf-8"
    assert sent.headers["x-relayflow-protocol"] == "1"
    assert RELAYFLOW_SIGNATURE_HEADER not in sent.headers
    assert adapter.timeouts == [(1.0, 9.0)]
    assert sleeps.delays == []


def test_relayflow_mode_signs_the_exact_bytes_sent() -> None:
    d, adapter, _ = dispatcher([(200, {})], secret="k", clock=lambda: 1_700_000_000)
    d.dispatch(REQUEST)
    sent = adapter.sent[0]
    body = sent.body
    assert isinstance(body, bytes)
    assert "Zoë".encode() in body
    RequestSigner("k", clock=lambda: 1_700_000_000).verify(sent.headers, body)
    assert sent.headers[RELAYFLOW_SIGNATURE_HEADER].startswith("t=1700000000,v1=")


def test_voyant_mode_signs_like_the_reference() -> None:
    d, adapter, _ = dispatcher([(200, {})], secret="k", mode="voyant")
    d.dispatch(REQUEST)
    sent = adapter.sent[0]
    assert sent.headers[VOYANT_SIGNATURE_HEADER] == sign_voyant(sent.body, "k")  # type: ignore[arg-type]
    assert sent.headers["x-voyant-protocol"] == "1"


@pytest.mark.parametrize(
    ("status", "body", "expected"),
    [
        (404, {"error": "workflow_not_found", "message": "no wf"}, (404, "workflow_not_found")),
        (401, {"error": "unauthorized", "message": "bad sig"}, (401, "unauthorized")),
        (400, {"unexpected": True}, (400, "tenant_error")),
        (426, b"upgrade please", (502, "tenant_invalid_response")),
        (200, b"<html>", (502, "tenant_invalid_response")),
        (200, [1, 2], (502, "tenant_invalid_response")),
        (302, {"error": "moved", "message": "elsewhere"}, (302, "moved")),
    ],
)
def test_non_transient_answers_map_per_the_reference(
    status: int, body: Any, expected: tuple[int, str]
) -> None:
    d, adapter, sleeps = dispatcher([(status, body)])
    answer_status, answer = d.dispatch(REQUEST)
    assert (answer_status, answer["error"]) == expected
    assert isinstance(answer["message"], str)
    assert len(adapter.sent) == 1
    assert sleeps.delays == []


def test_tenant_error_message_names_the_status() -> None:
    assert interpret_answer(418, b"{}") == (
        418,
        {"error": "tenant_error", "message": "tenant returned HTTP 418"},
    )


@pytest.mark.parametrize(
    "failure",
    [
        (503, {"error": "busy", "message": "later"}),
        (500, {"error": "executor_error", "message": "boom"}),
        (429, b"slow down"),
        requests.ConnectTimeout("connect timed out"),
        requests.ConnectionError("refused"),
    ],
)
def test_transient_failures_are_retried_then_succeed(failure: Any) -> None:
    d, adapter, sleeps = dispatcher([failure, failure, (200, {"status": "completed"})])
    assert d.dispatch(REQUEST) == (200, {"status": "completed"})
    assert len(adapter.sent) == 3
    assert sleeps.delays == [0.2, 0.4]


def test_a_read_timeout_is_not_retried_while_the_host_may_still_run_the_request() -> None:
    d, adapter, sleeps = dispatcher([requests.ReadTimeout("read timed out"), (200, {})])
    with pytest.raises(DispatchError) as caught:
        d.dispatch(REQUEST)
    assert caught.value.transient is True
    assert len(adapter.sent) == 1
    assert sleeps.delays == []


def test_the_read_timeout_lasts_until_the_request_deadline_plus_the_grace() -> None:
    now_s = 1_700_000_000.0
    d, adapter, _ = dispatcher(
        [(200, {})], connect_timeout=1.0, read_timeout=2.0, clock=lambda: now_s
    )
    # A deadline 600 s away: a dispatcher with a 60 s read timeout used to give up (and
    # retry) while the host was still within its deadline.
    d.dispatch({**REQUEST, "deadline": int(now_s * 1000) + 600_000})
    assert adapter.timeouts == [(1.0, 602.0)]


def test_transient_failures_raise_after_the_bounded_retries() -> None:
    d, adapter, sleeps = dispatcher([(503, {"error": "e", "message": "m"})] * 3)
    with pytest.raises(DispatchError) as caught:
        d.dispatch(REQUEST)
    assert caught.value.transient is True
    assert caught.value.status == 503
    assert "HTTP 503 (e: m)" in caught.value.message
    assert "after 3 attempts" in caught.value.message
    assert len(adapter.sent) == 3
    assert len(sleeps.delays) == 2


def test_unreachable_host_raises_a_transient_error_without_status() -> None:
    d, _, _ = dispatcher([requests.ConnectionError("refused")] * 3)
    with pytest.raises(DispatchError, match="unreachable") as caught:
        d.dispatch(REQUEST)
    assert caught.value.transient is True
    assert caught.value.status is None
    assert caught.value.code == "tenant_unreachable"


def test_retry_after_is_honoured_within_the_cap() -> None:
    sleeps = Sleeps()
    d, _, _ = dispatcher(
        [(429, b"", {"Retry-After": "1"}), (429, b"", {"Retry-After": "30"}), (200, {})],
        retry=TransportRetry(retries=2, base_delay_s=0.1, max_delay_s=5.0, sleep=sleeps),
    )
    d.dispatch(REQUEST)
    assert sleeps.delays == [1.0, 5.0]


def test_zero_retries_fail_at_once() -> None:
    sleeps = Sleeps()
    d, adapter, _ = dispatcher(
        [(502, b"bad gateway")], retry=TransportRetry(retries=0, sleep=sleeps)
    )
    with pytest.raises(DispatchError):
        d.dispatch(REQUEST)
    assert len(adapter.sent) == 1
    assert sleeps.delays == []


def test_a_request_that_cannot_be_sent_is_not_transient() -> None:
    d, _, _ = dispatcher([requests.exceptions.InvalidURL("no host")])
    with pytest.raises(DispatchError) as caught:
        d.dispatch(REQUEST)
    assert caught.value.transient is False


def test_each_retry_is_signed_afresh() -> None:
    times = iter([1_700_000_000, 1_700_000_400])
    d, adapter, _ = dispatcher([(500, b"{}"), (200, {})], secret="k", clock=lambda: next(times))
    d.dispatch(REQUEST)
    stamps = [r.headers[RELAYFLOW_SIGNATURE_HEADER].split(",")[0] for r in adapter.sent]
    assert stamps == ["t=1700000000", "t=1700000400"]


# ---- per-step checkpoints through the orchestrator (opt-in) ---------------------------------

CHANNEL_REQUEST: dict[str, Any] = {
    "protocolVersion": 1,
    "runId": "orders/r 1",
    "deadline": 1_700_000_060_000,
    "checkpoint": {"seq": 4},
}
API = "https://api.test/"


def _clock() -> float:
    return 1_700_000_000.0


def test_the_opt_in_adds_the_route_and_a_capability_bound_to_run_slot_and_deadline() -> None:
    from relayflow.dispatch.capabilities import CapabilitySigner

    d, adapter, _ = dispatcher(
        [(200, {"status": "completed"})], secret="s", clock=_clock, checkpoint_url=API
    )
    d.dispatch(CHANNEL_REQUEST)
    sent = json.loads(adapter.sent[0].body)  # type: ignore[arg-type]
    channel = sent["checkpoint"]
    assert channel["url"] == "https://api.test/api/runs/orders%2Fr%201/checkpoints"
    capability = CapabilitySigner("s", clock=_clock).verify(channel["capability"])
    assert (capability.run_id, capability.first_seq, capability.expires_at) == (
        "orders/r 1",
        4,
        1_700_000_060_000,
    )
    assert {k: v for k, v in sent.items() if k != "checkpoint"} == {
        k: v for k, v in CHANNEL_REQUEST.items() if k != "checkpoint"
    }


def test_without_the_opt_in_or_a_channel_the_request_is_sent_unchanged() -> None:
    plain, adapter, _ = dispatcher([(200, {})], secret="s", clock=_clock)
    plain.dispatch(CHANNEL_REQUEST)
    assert json.loads(adapter.sent[0].body) == CHANNEL_REQUEST  # type: ignore[arg-type]
    opted, adapter, _ = dispatcher([(200, {})], secret="s", clock=_clock, checkpoint_url=API)
    no_channel = {k: v for k, v in CHANNEL_REQUEST.items() if k != "checkpoint"}
    opted.dispatch(no_channel)
    assert json.loads(adapter.sent[0].body) == no_channel  # type: ignore[arg-type]


def test_the_opt_in_needs_the_signing_secret() -> None:
    from relayflow.errors import ValidationError

    with pytest.raises(ValidationError, match="signing secret"):
        HttpDispatcher(URL, checkpoint_url=API)


@pytest.mark.parametrize(
    "failure",
    [
        requests.ConnectionError("Connection aborted."),
        (503, {"error": "busy"}),
        (500, {"error": "executor_error", "message": "boom"}),
    ],
)
def test_with_the_opt_in_a_request_that_may_have_run_is_not_resent(failure: Any) -> None:
    # The host may have made steps durable: the engine reads them before invoking again.
    d, adapter, sleeps = dispatcher([failure, (200, {})], secret="s", checkpoint_url=API)
    with pytest.raises(DispatchError) as raised:
        d.dispatch(CHANNEL_REQUEST)
    assert raised.value.transient
    assert (len(adapter.sent), sleeps.delays) == (1, [])


def test_with_the_opt_in_a_connection_never_made_is_retried() -> None:
    from urllib3.exceptions import MaxRetryError, NewConnectionError

    refused = requests.ConnectionError(
        MaxRetryError(None, URL, NewConnectionError(None, "refused"))  # type: ignore[arg-type]
    )
    d, adapter, _ = dispatcher(
        [refused, requests.ConnectTimeout("slow"), (200, {})], secret="s", checkpoint_url=API
    )
    assert d.dispatch(CHANNEL_REQUEST) == (200, {})
    assert len(adapter.sent) == 3
