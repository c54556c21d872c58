"""The local HTTP adapter: real requests become API Gateway v2 events and answers go back."""

from __future__ import annotations

import base64
import json
import socket
from collections.abc import Iterator
from typing import Any

import pytest
import requests

from relayflow.local.http_adapter import LambdaHttpServer, PortInUseError, build_http_api_event


class Echo:
    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.contexts: list[Any] = []

    def __call__(self, event: dict[str, Any], context: Any) -> dict[str, Any]:
        self.events.append(event)
        self.contexts.append(context)
        if event["rawPath"] == "/boom":
            raise RuntimeError("handler crashed")
        if event["rawPath"] == "/bare":
            return {"hello": "world"}
        return {
            "statusCode": 201,
            "headers": {"Content-Type": "application/json", "X-Trace": "t-1"},
            "cookies": ["a=1"],
            "body": json.dumps({"path": event["rawPath"]}),
            "isBase64Encoded": False,
        }


@pytest.fixture
def served() -> Iterator[tuple[LambdaHttpServer, Echo]]:
    echo = Echo()
    errors: list[BaseException] = []
    server = LambdaHttpServer(echo, port=0, on_error=errors.append)
    server.start()
    try:
        yield server, echo
    finally:
        server.stop()


def test_a_request_becomes_an_http_api_v2_event(served: tuple[LambdaHttpServer, Echo]) -> None:
    server, echo = served
    response = requests.post(
        f"{server.url}/api/runs/p%2Fchild?limit=5&tag=a&tag=b",
        json={"x": 1},
        headers={"Authorization": "Bearer t"},
        timeout=5,
    )
    assert response.status_code == 201
    assert response.json() == {"path": "/api/runs/p%2Fchild"}
    assert response.headers["X-Trace"] == "t-1"
    assert response.headers["Set-Cookie"] == "a=1"
    event = echo.events[0]
    assert event["version"] == "2.0"
    assert event["rawPath"] == "/api/runs/p%2Fchild"
    assert event["requestContext"]["http"]["path"] == "/api/runs/p/child"
    assert event["requestContext"]["http"]["method"] == "POST"
    assert event["requestContext"]["http"]["sourceIp"] == "127.0.0.1"
    assert event["rawQueryString"] == "limit=5&tag=a&tag=b"
    assert event["queryStringParameters"] == {"limit": "5", "tag": "a,b"}
    assert event["headers"]["authorization"] == "Bearer t"
    assert json.loads(event["body"]) == {"x": 1}
    assert event["isBase64Encoded"] is False
    context = echo.contexts[0]
    assert context.aws_request_id == event["requestContext"]["requestId"]
    assert 0 < context.get_remaining_time_in_millis() <= 30_000


def test_a_get_without_body_has_no_body_or_query(served: tuple[LambdaHttpServer, Echo]) -> None:
    server, echo = served
    requests.get(f"{server.url}/api/healthz", timeout=5)
    event = echo.events[0]
    assert "body" not in event
    assert "queryStringParameters" not in event
    assert event["requestContext"]["http"]["method"] == "GET"


def test_binary_bodies_are_base64_encoded() -> None:
    event = build_http_api_event(
        "POST", "/x", {"Content-Type": "application/octet-stream"}, b"\x00\xff"
    )
    assert event["isBase64Encoded"] is True
    assert base64.b64decode(event["body"]) == b"\x00\xff"


def test_a_bare_answer_is_sent_as_json(served: tuple[LambdaHttpServer, Echo]) -> None:
    server, _ = served
    response = requests.get(f"{server.url}/bare", timeout=5)
    assert (response.status_code, response.json()) == (200, {"hello": "world"})


def test_a_crashing_handler_answers_502(served: tuple[LambdaHttpServer, Echo]) -> None:
    server, _ = served
    response = requests.get(f"{server.url}/boom", timeout=5)
    assert response.status_code == 502
    assert response.json()["error"] == "internal_error"


def test_a_taken_port_raises_port_in_use() -> None:
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen()
    port = holder.getsockname()[1]
    try:
        with pytest.raises(PortInUseError, match=f"port {port} on 127.0.0.1 is already in use"):
            LambdaHttpServer(Echo(), port=port)
    finally:
        holder.close()
