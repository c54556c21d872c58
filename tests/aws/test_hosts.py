"""Step hosts check method and signature before running a request, over Lambda and HTTP."""

from __future__ import annotations

import base64
import io
import json
import socket
import threading
from collections.abc import Iterator
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

import pytest
import requests
from aws_fakes import DictStore

from relayflow.dispatch.http_dispatcher import HttpDispatcher, TransportRetry
from relayflow.dispatch.lambda_dispatcher import LambdaDispatcher
from relayflow.dispatch.signing import RequestSigner, sign_voyant
from relayflow.errors import DispatchError
from relayflow.payloads import is_pointer, offload
from relayflow.protocol import StepRequest
from relayflow.sdk.registry import workflow
from relayflow.worker.hosts import (
    make_lambda_handler,
    make_step_host,
    make_wsgi_app,
    serving_step_requests,
)

REQUEST: dict[str, Any] = {"protocolVersion": 1, "runId": "r1", "workflowId": "w", "input": 2}
NOW = 1_700_000_000


class RecordingHandler:
    """A step handler that doubles the input and records what it was given."""

    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []

    def __call__(self, raw: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        self.seen.append(raw)
        return 200, {"status": "completed", "output": raw.get("input"), "journal": {}}


def body_of(request: dict[str, Any]) -> bytes:
    return json.dumps(request).encode()


def test_host_runs_a_valid_signed_request() -> None:
    handler = RecordingHandler()
    host = make_step_host(secret="k", handler=handler)
    body = body_of(REQUEST)
    headers = RequestSigner("k").headers(body)
    assert host.handle("POST", headers, body) == (
        200,
        {"status": "completed", "output": 2, "journal": {}},
    )
    assert handler.seen == [REQUEST]


def test_only_a_host_that_verifies_signatures_follows_a_checkpoint_route() -> None:
    channel = {"seq": 3, "url": "https://api.test/api/runs/r1/checkpoints", "capability": "c"}
    request = {**REQUEST, "checkpoint": channel}
    body = body_of(request)
    signed, unsigned = RecordingHandler(), RecordingHandler()
    make_step_host(secret="k", handler=signed).handle(
        "POST", RequestSigner("k").headers(body), body
    )
    make_step_host(handler=unsigned).handle("POST", {}, body)
    assert signed.seen == [request]
    assert unsigned.seen == [{**REQUEST, "checkpoint": {"seq": 3}}]


@pytest.mark.parametrize(
    ("method", "headers", "body", "status", "code"),
    [
        ("GET", {}, b"", 405, "method_not_allowed"),
        ("PUT", {}, b"{}", 405, "method_not_allowed"),
        ("POST", {}, b"{}", 401, "unauthorized"),
        ("POST", {"x-relayflow-signature": "nonsense"}, b"{}", 401, "unauthorized"),
        ("POST", {"x-relayflow-signature": f"t=1,v1={'a' * 64}"}, b"{}", 401, "unauthorized"),
        ("POST", {"x-relayflow-signature": f"t={NOW},v1={'a' * 64}"}, b"{}", 401, "unauthorized"),
    ],
)
def test_host_refusals_come_in_the_reference_order(
    method: str, headers: dict[str, str], body: bytes, status: int, code: str
) -> None:
    handler = RecordingHandler()
    host = make_step_host(handler=handler, secret="k")
    host.signer = RequestSigner("k", clock=lambda: NOW)
    answer_status, answer = host.handle(method, headers, body)
    assert (answer_status, answer["error"]) == (status, code)
    assert handler.seen == []


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        (b"{not json", 400, "invalid_json"),
        (b"", 400, "invalid_json"),
        (b"  \n ", 400, "invalid_json"),
        (b'{"runId": NaN}', 400, "invalid_json"),
        (b"\xff\xfe{}", 400, "invalid_json"),
        (b"[1, 2]", 400, "invalid_request"),
    ],
)
def test_unsigned_host_checks_json(body: bytes, status: int, code: str) -> None:
    status_, answer = make_step_host(handler=RecordingHandler()).handle("POST", {}, body)
    assert (status_, answer["error"]) == (status, code)


def test_signed_host_checks_the_signature_before_json() -> None:
    host = make_step_host(secret="k", mode="voyant", handler=RecordingHandler())
    assert host.handle("POST", {}, b"")[1]["error"] == "unauthorized"
    signed = {"x-voyant-dispatch-auth": sign_voyant(b"", "k")}
    assert host.handle("POST", signed, b"") == (
        400,
        {"error": "invalid_json", "message": "the request body is empty"},
    )


@pytest.mark.parametrize("envelope", [{"body": ""}, {"body": "%%", "isBase64Encoded": True}])
def test_lambda_host_answers_invalid_json_for_envelopes_without_json(
    envelope: dict[str, Any],
) -> None:
    handler = make_lambda_handler(handler=RecordingHandler())
    answer = handler({"headers": {}, **envelope}, None)
    assert answer["statusCode"] == 400
    assert json.loads(answer["body"])["error"] == "invalid_json"


def test_voyant_mode_host_accepts_reference_signatures() -> None:
    host = make_step_host(secret="k", mode="voyant", handler=RecordingHandler())
    body = body_of(REQUEST)
    assert host.handle("POST", {"x-voyant-dispatch-auth": sign_voyant(body, "k")}, body)[0] == 200
    status, answer = host.handle("POST", {"x-voyant-dispatch-auth": "@@"}, body)
    assert (status, answer["message"]) == (
        401,
        "malformed x-voyant-dispatch-auth header (expected base64)",
    )


# ---- Lambda ------------------------------------------------------------------------------------


def test_lambda_handler_answers_a_direct_invocation() -> None:
    handler = make_lambda_handler(handler=RecordingHandler())
    assert handler(REQUEST, None) == {
        "statusCode": 200,
        "body": {"status": "completed", "output": 2, "journal": {}},
    }


def test_signed_lambda_host_refuses_a_bare_request() -> None:
    handler = make_lambda_handler(secret="k", handler=RecordingHandler())
    answer = handler(REQUEST, None)
    assert answer["statusCode"] == 401
    assert answer["body"]["error"] == "unauthorized"
    assert "missing x-relayflow-signature header" in answer["body"]["message"]


def test_lambda_handler_verifies_a_signed_envelope() -> None:
    handler = make_lambda_handler(secret="k", handler=RecordingHandler())
    body = json.dumps(REQUEST)
    good = {"headers": RequestSigner("k").headers(body), "body": body}
    answer = handler(good, None)
    assert answer["statusCode"] == 200
    assert json.loads(answer["body"])["output"] == 2
    bad = {"headers": RequestSigner("other").headers(body), "body": body}
    refused = handler(bad, None)
    assert refused["statusCode"] == 401
    assert json.loads(refused["body"])["message"].endswith("does not match request body")


def test_lambda_handler_serves_function_url_events() -> None:
    handler = make_lambda_handler(secret="k", handler=RecordingHandler())
    body = json.dumps(REQUEST).encode()
    event = {
        "version": "2.0",
        "headers": {**RequestSigner("k").headers(body), "content-type": "application/json"},
        "requestContext": {"http": {"method": "POST", "path": "/"}},
        "body": base64.b64encode(body).decode(),
        "isBase64Encoded": True,
    }
    answer = handler(event, None)
    assert answer["statusCode"] == 200
    assert answer["headers"]["content-type"].startswith("application/json")
    get_event = {**event, "requestContext": {"http": {"method": "GET"}}}
    assert handler(get_event, None)["statusCode"] == 405


class InProcessLambda:
    """A Lambda client that runs a handler in this process (moto cannot run code)."""

    def __init__(self, handler: Any) -> None:
        self.handler = handler

    def invoke(self, **kwargs: Any) -> dict[str, Any]:
        result = self.handler(json.loads(kwargs["Payload"]), None)
        return {"StatusCode": 200, "Payload": io.BytesIO(json.dumps(result).encode())}


@pytest.mark.parametrize("secret", [None, "k"])
def test_lambda_dispatcher_and_lambda_host_agree(secret: str | None) -> None:
    recorder = RecordingHandler()
    client = InProcessLambda(make_lambda_handler(secret=secret, handler=recorder))
    dispatcher = LambdaDispatcher("host", client_factory=lambda: client, secret=secret)  # type: ignore[arg-type,return-value]
    assert dispatcher.dispatch(REQUEST) == (
        200,
        {"status": "completed", "output": 2, "journal": {}},
    )
    assert recorder.seen == [REQUEST]


def test_lambda_host_resolves_and_offloads_payloads() -> None:
    store = DictStore()
    big = {"blob": "x" * 5000}
    handler = make_lambda_handler(handler=RecordingHandler(), payload_store=store, payload_cap=100)
    answer = handler({**REQUEST, "input": offload(big, store, cap=100)}, None)
    assert store.puts == 1
    assert is_pointer(answer["body"]["output"])


# ---- WSGI over real HTTP on 127.0.0.1 ---------------------------------------------------------


class QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        return None


@pytest.fixture
def serve() -> Iterator[Any]:
    servers: list[WSGIServer] = []

    def start(app: Any) -> str:
        server = make_server("127.0.0.1", 0, app, handler_class=QuietHandler)
        servers.append(server)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        return f"http://127.0.0.1:{server.server_port}/step"

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("mode", ["relayflow", "voyant"])
def test_http_dispatcher_reaches_a_signed_wsgi_host(serve: Any, mode: str) -> None:
    recorder = RecordingHandler()
    url = serve(make_wsgi_app(secret="k", mode=mode, handler=recorder))
    dispatcher = HttpDispatcher(url, secret="k", mode=mode)  # type: ignore[arg-type]
    assert dispatcher.dispatch(REQUEST) == (
        200,
        {"status": "completed", "output": 2, "journal": {}},
    )
    assert recorder.seen == [REQUEST]


def test_wsgi_host_refuses_wrong_secret_and_other_methods(serve: Any) -> None:
    recorder = RecordingHandler()
    url = serve(make_wsgi_app(secret="k", handler=recorder))
    status, answer = HttpDispatcher(url, secret="wrong").dispatch(REQUEST)
    assert (status, answer["error"]) == (401, "unauthorized")
    unsigned_status, _ = HttpDispatcher(url).dispatch(REQUEST)
    assert unsigned_status == 401
    got = requests.get(url, timeout=5)
    assert got.status_code == 405
    assert got.headers["Allow"] == "POST"
    assert got.json()["error"] == "method_not_allowed"
    assert recorder.seen == []


def test_wsgi_host_refuses_oversized_bodies(serve: Any) -> None:
    url = serve(make_wsgi_app(handler=RecordingHandler(), max_body_bytes=10))
    status, answer = HttpDispatcher(url).dispatch(REQUEST)
    assert (status, answer["error"]) == (413, "payload_too_large")


def test_unreachable_http_host_is_transient() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    sleeps: list[float] = []
    dispatcher = HttpDispatcher(
        f"http://127.0.0.1:{port}/step", retry=TransportRetry(retries=1, sleep=sleeps.append)
    )
    with pytest.raises(DispatchError, match="unreachable") as caught:
        dispatcher.dispatch(REQUEST)
    assert caught.value.transient is True
    assert len(sleeps) == 1


@workflow(id="aws.hosts.double")
def double(data: int, ctx: Any) -> int:
    return data * 2


def test_the_default_handler_runs_registered_workflows_over_lambda_and_http(serve: Any) -> None:
    request = StepRequest(
        run_id="r-host", workflow_id="aws.hosts.double", invocation_count=1, input=21
    ).to_wire()
    client = InProcessLambda(make_lambda_handler(secret="k"))
    status, body = LambdaDispatcher(
        "host",
        client_factory=lambda: client,  # type: ignore[arg-type,return-value]
        secret="k",
    ).dispatch(request)
    assert (status, body["status"], body["output"]) == (200, "completed", 42)
    url = serve(make_wsgi_app(secret="k", mode="voyant"))
    status, body = HttpDispatcher(url, secret="k", mode="voyant").dispatch(request)
    assert (status, body["status"], body["output"]) == (200, "completed", 42)
    missing = {**request, "workflowId": "aws.hosts.nope"}
    assert HttpDispatcher(url, secret="k", mode="voyant").dispatch(missing)[0] == 404


def test_an_orchestrator_function_answers_step_requests_and_routes_everything_else() -> None:
    seen: list[Any] = []
    host = make_step_host(handler=lambda raw: (200, {"ran": raw["runId"]}))
    handler = serving_step_requests(
        lambda event, context: seen.append(event) or "routed", lambda: host
    )
    request = {"protocolVersion": 1, "runId": "r1", "workflowId": "w"}
    assert handler(request, None) == {"statusCode": 200, "body": {"ran": "r1"}}
    envelope = {"headers": {}, "body": json.dumps(request)}
    assert handler(envelope, None)["statusCode"] == 200
    others = [
        {"runId": "r1", "wakeAt": 5},
        {"Records": [{"body": json.dumps({"runId": "r1", "wakeAt": 5})}]},
        {"version": "2.0", "routeKey": "GET /api/runs", "headers": {}, "body": "{}"},
        "not an object",
    ]
    assert [handler(event, None) for event in others] == ["routed"] * len(others)
    assert seen == others
