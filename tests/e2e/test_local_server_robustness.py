"""The local HTTP server under load and under bad clients (real sockets on 127.0.0.1).

Every refusal the server produces itself answers ``{"error": code, "message": ...}``; no
client, however rude, costs a thread for long, a 5xx or a traceback.
"""

from __future__ import annotations

import http.client
import json
import logging
import socket
import struct
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from dev_process import ROOT, DevProcess, start_dev
from load_probe import hammer

from relayflow.local.http_adapter import (
    DEFAULT_READ_TIMEOUT_S,
    DEFAULT_THREADS,
    MAX_URL_BYTES,
    LambdaHttpServer,
)

TOKEN = "robust-token"
WAIT_S = 10.0
ALLOWED = "DELETE, GET, HEAD, OPTIONS, PATCH, POST, PUT"


@dataclass
class RawAnswer:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        assert self.headers.get("content-type") == "application/json", self.headers
        return json.loads(self.body)


def exchange(port: int, data: bytes, *, method: str = "GET") -> RawAnswer:
    """Send ``data`` as is on a new connection and read the answer."""
    with socket.create_connection(("127.0.0.1", port), timeout=WAIT_S) as sock:
        sock.sendall(data)
        answer = http.client.HTTPResponse(sock, method=method)
        answer.begin()
        body = answer.read()
        headers = {k.lower(): v for k, v in answer.getheaders()}
        return RawAnswer(answer.status, headers, body)


class Handler:
    """Answers 200 JSON; a request to ``/held`` waits for :attr:`release` first."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()
        self.returned = threading.Event()
        self.paths: list[str] = []

    def __call__(self, event: dict[str, Any], context: Any) -> dict[str, Any]:
        self.paths.append(event["rawPath"])
        if event["rawPath"] == "/held":
            self.entered.set()
            assert self.release.wait(WAIT_S)
            self.returned.set()
        return {
            "statusCode": 200,
            "headers": {"Content-Type": "application/json", "Connection": "keep-alive"},
            "body": json.dumps({"path": event["rawPath"], "body": event.get("body")}),
        }


@pytest.fixture
def handler() -> Handler:
    return Handler()


@pytest.fixture
def server(handler: Handler) -> Iterator[LambdaHttpServer]:
    # One worker thread: a request that held it would block every other one.
    served = LambdaHttpServer(handler, threads=1, read_timeout_s=1)
    served.start()
    try:
        yield served
    finally:
        served.stop()


def test_a_truncated_body_answers_408_and_holds_no_thread(
    server: LambdaHttpServer, handler: Handler
) -> None:
    with socket.create_connection(("127.0.0.1", server.port), timeout=WAIT_S) as slow:
        slow.sendall(b"POST /slow HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nonly-part")
        # The only worker is free: another request is answered while the body is missing.
        other = exchange(server.port, b"GET /other HTTP/1.1\r\nHost: x\r\n\r\n")
        assert (other.status, other.json()["path"]) == (200, "/other")
        answer = http.client.HTTPResponse(slow)
        answer.begin()
        body = json.loads(answer.read())
    assert answer.status == 408
    assert body == {
        "error": "request_timeout",
        "message": "the request was not received in full within 1 s",
    }
    assert handler.paths == ["/other"]


@pytest.mark.parametrize("length", [b"-1", b"abc", b"1e3", b"12, 13"])
def test_a_bad_content_length_answers_400(
    server: LambdaHttpServer, handler: Handler, length: bytes
) -> None:
    answer = exchange(
        server.port, b"POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: %s\r\n\r\n" % length
    )
    assert answer.status == 400
    assert answer.json()["error"] == "bad_request"
    assert "Content-Length" in answer.json()["message"]
    assert handler.paths == []


def test_a_body_over_10_mb_answers_413_before_it_is_sent(server: LambdaHttpServer) -> None:
    answer = exchange(
        server.port, b"POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 20000000\r\n\r\n"
    )
    assert answer.status == 413
    assert answer.json()["error"] == "payload_too_large"


def test_trace_answers_405_with_the_methods_allowed(
    server: LambdaHttpServer, handler: Handler
) -> None:
    answer = exchange(server.port, b"TRACE / HTTP/1.1\r\nHost: x\r\n\r\n")
    assert answer.status == 405
    assert answer.json() == {
        "error": "method_not_allowed",
        "message": f"TRACE is not supported; use one of {ALLOWED}",
    }
    assert answer.headers["allow"] == ALLOWED
    assert handler.paths == []


def test_a_70_kb_url_answers_414(server: LambdaHttpServer, handler: Handler) -> None:
    answer = exchange(server.port, b"GET /" + b"a" * 70_000 + b" HTTP/1.1\r\nHost: x\r\n\r\n")
    assert answer.status == 414
    assert answer.json() == {
        "error": "uri_too_long",
        "message": f"the request URL is longer than {MAX_URL_BYTES} bytes",
    }
    assert handler.paths == []


def test_headers_over_the_limit_answer_431(server: LambdaHttpServer) -> None:
    answer = exchange(
        server.port, b"GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + b"b" * 300_000 + b"\r\n\r\n"
    )
    assert answer.status == 431
    assert answer.json()["error"] == "headers_too_large"


def test_a_garbage_request_line_answers_400(server: LambdaHttpServer) -> None:
    answer = exchange(server.port, b"NOT AN HTTP REQUEST\r\n\r\n")
    assert answer.status == 400
    assert answer.json()["error"] == "bad_request"


@pytest.mark.parametrize("target", ["//[x", "//a:b:c/x?q=1", "/%ff%fe", "/a?%zz=1&b=%ff"])
def test_odd_paths_reach_the_handler_as_sent(
    server: LambdaHttpServer, handler: Handler, target: str
) -> None:
    answer = exchange(server.port, f"GET {target} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    assert answer.status == 200
    assert handler.paths == [target.partition("?")[0]]


def test_head_answers_the_headers_without_a_body(server: LambdaHttpServer) -> None:
    answer = exchange(server.port, b"HEAD /h HTTP/1.1\r\nHost: x\r\n\r\n", method="HEAD")
    assert answer.status == 200
    assert int(answer.headers["content-length"]) == len(json.dumps({"path": "/h", "body": None}))
    assert answer.body == b""


def test_keep_alive_serves_several_requests_on_one_connection(server: LambdaHttpServer) -> None:
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=WAIT_S)
    try:
        for n in range(3):
            body = json.dumps({"n": n})
            connection.request("POST", f"/k{n}", body=body.encode())
            answer = connection.getresponse()
            assert json.loads(answer.read()) == {"path": f"/k{n}", "body": body}
    finally:
        connection.close()


def test_a_client_that_disconnects_leaves_no_traceback(
    server: LambdaHttpServer,
    handler: Handler,
    capfd: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    client = socket.create_connection(("127.0.0.1", server.port), timeout=WAIT_S)
    client.sendall(b"GET /held HTTP/1.1\r\nHost: x\r\n\r\n")
    assert handler.entered.wait(WAIT_S)
    # Close with a reset, as a client killed mid-request does; the answer has nowhere to go.
    client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    client.close()
    handler.release.set()
    assert handler.returned.wait(WAIT_S)

    after = exchange(server.port, b"GET /after HTTP/1.1\r\nHost: x\r\n\r\n")
    server.stop()

    assert after.status == 200
    captured = capfd.readouterr()
    assert "Traceback" not in captured.err + captured.out
    assert [r for r in caplog.records if r.levelno >= logging.WARNING or r.exc_info] == []


# -- the dev stack: the API and moto as ``relayflow dev`` runs them --------------------------


@pytest.fixture(scope="module")
def dev() -> Iterator[DevProcess]:
    process = start_dev("--token", TOKEN)
    try:
        yield process
    finally:
        try:
            process.interrupt()
        finally:
            process.kill()


def _port(url: str) -> int:
    return int(url.rsplit(":", 1)[1])


def test_fifty_concurrent_clients_each_get_their_own_answer(dev: DevProcess) -> None:
    result = hammer(dev.url, TOKEN, clients=50, rounds=4)
    assert result.requests == 200, result.summary()
    assert (result.resets, result.server_errors, result.wrong_answers, result.other_failures) == (
        0,
        0,
        0,
        0,
    ), f"{result.summary()}; e.g. {result.samples}"
    assert not [line for line in dev.errors if "Traceback" in line], dev.errors


def test_the_api_answers_trace_and_a_huge_url_as_json(dev: DevProcess) -> None:
    trace = exchange(_port(dev.url), b"TRACE /api/runs HTTP/1.1\r\nHost: x\r\n\r\n")
    huge = exchange(_port(dev.url), b"GET /api/" + b"r" * 70_000 + b" HTTP/1.1\r\nHost: x\r\n\r\n")
    assert (trace.status, trace.json()["error"]) == (405, "method_not_allowed")
    assert (huge.status, huge.json()["error"]) == (414, "uri_too_long")


def test_the_moto_server_takes_fifty_concurrent_clients(dev: DevProcess) -> None:
    moto = next(line.split()[-1] for line in dev.lines if line.strip().startswith("moto "))
    auth = (
        "AWS4-HMAC-SHA256 Credential=testing/20260101/us-east-1/dynamodb/aws4_request, "
        "SignedHeaders=host, Signature=0"
    )
    outcomes: list[str] = []
    lock = threading.Lock()
    barrier = threading.Barrier(50)

    def client() -> None:
        barrier.wait(timeout=WAIT_S)
        connection = http.client.HTTPConnection("127.0.0.1", _port(moto), timeout=60)
        try:
            connection.request(
                "POST",
                "/",
                body=b"{}",
                headers={
                    "X-Amz-Target": "DynamoDB_20120810.ListTables",
                    "Content-Type": "application/x-amz-json-1.0",
                    "Authorization": auth,
                    "Connection": "close",
                },
            )
            answer = connection.getresponse()
            outcome = str(answer.status) if b"relayflow-runs" in answer.read() else "other"
        except OSError as exc:
            outcome = type(exc).__name__
        finally:
            connection.close()
        with lock:
            outcomes.append(outcome)

    threads = [threading.Thread(target=client, daemon=True) for _ in range(50)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert outcomes == ["200"] * 50


def test_the_docs_state_the_servers_settings() -> None:
    readme = (ROOT / "docs" / "getting-started" / "local-stack.md").read_text()
    assert f"{DEFAULT_THREADS} requests at once" in readme
    assert f"within {DEFAULT_READ_TIMEOUT_S} s answers 408" in readme
