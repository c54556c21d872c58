"""An HTTP step host and the orchestrator's API, both reached over ``requests`` in process.

The engine of a :class:`WorkflowTestEnv` dispatches with a real :class:`HttpDispatcher`; its
requests reach a WSGI step host (``make_wsgi_app``) through a transport adapter, and the
host's checkpoint calls reach the API (``create_app`` over the same driver) through another.
A ``relayflow.testing.crash()`` inside the host is the host process dying: the dispatcher
sees the connection drop, as it would over a network.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from http.client import RemoteDisconnected
from typing import Any
from urllib.parse import urlsplit

import requests
from requests.adapters import BaseAdapter
from urllib3.exceptions import ProtocolError

from relayflow.api.app import RelayflowResolver, create_app
from relayflow.api.auth import StaticTokenAuth
from relayflow.api.metrics import RecordingMetrics
from relayflow.dispatch.capabilities import CapabilitySigner
from relayflow.dispatch.http_dispatcher import HttpDispatcher, TransportRetry
from relayflow.dispatch.signing import RequestSigner
from relayflow.errors import HostCrashSignal
from relayflow.ports import DispatcherResolver
from relayflow.testing import WorkflowTestEnv
from relayflow.worker import ExecutorOptions, handle_step_request
from relayflow.worker.hosts import StepHost, make_wsgi_app

SECRET = "checkpoint-test-secret"
HOST_URL = "https://host.test/step"
API_URL = "https://orchestrator.test"

#: Decides the fate of one checkpoint call before the API sees it: None lets it through, an
#: HTTP status answers instead, an exception is raised instead.
Fault = Callable[[requests.PreparedRequest], int | BaseException | None]


def _response(request: requests.PreparedRequest, status: int, body: bytes) -> requests.Response:
    response = requests.Response()
    response.status_code = status
    response._content = body
    response.headers["content-type"] = "application/json"
    response.url = request.url or ""
    response.request = request
    return response


def _body(request: requests.PreparedRequest) -> bytes:
    body = request.body or b""
    return body.encode() if isinstance(body, str) else body


class WsgiAdapter(BaseAdapter):
    """Serves requests with a WSGI app; a host crash drops the connection."""

    def __init__(self, app: Any) -> None:
        super().__init__()
        self.app = app
        self.requests: list[dict[str, Any]] = []
        #: Every request as sent: headers and body bytes (what a capture would hold).
        self.sent: list[tuple[dict[str, str], bytes]] = []

    def send(  # type: ignore[override]
        self, request: requests.PreparedRequest, **_: Any
    ) -> requests.Response:
        body = _body(request)
        self.requests.append(json.loads(body))
        self.sent.append((dict(request.headers), body))
        environ = {
            "REQUEST_METHOD": request.method,
            "PATH_INFO": urlsplit(request.url or "").path,
            "CONTENT_LENGTH": str(len(body)),
            "CONTENT_TYPE": request.headers.get("content-type", ""),
            "wsgi.input": io.BytesIO(body),
            **{f"HTTP_{k.upper().replace('-', '_')}": v for k, v in request.headers.items()},
        }
        answer: dict[str, Any] = {}

        def start_response(status: str, headers: list[tuple[str, str]]) -> None:
            answer["status"] = int(status.split()[0])

        try:
            payload = b"".join(self.app(environ, start_response))
        except HostCrashSignal as exc:
            raise requests.ConnectionError(
                ProtocolError("Connection aborted.", RemoteDisconnected("host died"))
            ) from exc
        return _response(request, answer["status"], payload)

    def close(self) -> None:
        return None


class LambdaContext:
    """What the API reads of a Lambda context."""

    aws_request_id = "lambda-req-checkpoint"
    function_name = "relayflow-api"

    def get_remaining_time_in_millis(self) -> int:
        return 30_000


class ApiAdapter(BaseAdapter):
    """Serves requests with the API resolver, as API Gateway (HTTP API v2) would."""

    def __init__(self, app: RelayflowResolver, fault: Fault | None = None) -> None:
        super().__init__()
        self.app = app
        self.fault = fault
        self.calls = 0
        self.stored = 0

    def send(  # type: ignore[override]
        self, request: requests.PreparedRequest, **_: Any
    ) -> requests.Response:
        self.calls += 1
        failure = self.fault(request) if self.fault is not None else None
        if isinstance(failure, BaseException):
            raise failure
        if failure is not None:
            return _response(request, failure, b'{"error":"unavailable","message":"down"}')
        answer = self.app.resolve(api_event(request), LambdaContext())
        if answer["statusCode"] == 200:
            self.stored += 1
        return _response(request, answer["statusCode"], answer["body"].encode())

    def close(self) -> None:
        return None


def api_event(request: requests.PreparedRequest) -> dict[str, Any]:
    """The API Gateway v2 event of one ``requests`` request."""
    url = urlsplit(request.url or "")
    return {
        "version": "2.0",
        "routeKey": "$default",
        "rawPath": url.path,
        "rawQueryString": url.query,
        "headers": {k.lower(): v for k, v in request.headers.items()},
        "requestContext": {
            "http": {"method": request.method, "path": url.path, "sourceIp": "203.0.113.7"},
            "requestId": "req-checkpoint",
            "stage": "$default",
        },
        "body": _body(request).decode(),
        "isBase64Encoded": False,
    }


class HttpHostedEnv:
    """A test env whose runs are hosted by an HTTP step host.

    Args:
        env: The env (its engine's dispatcher is replaced).
        checkpoints: Whether the dispatcher offers per-step checkpoints through the API.
        services: What workflow bodies resolve.
        fault: Makes checkpoint calls fail (see :data:`Fault`).
    """

    def __init__(
        self,
        env: WorkflowTestEnv,
        *,
        checkpoints: bool,
        services: dict[str, object],
        fault: Fault | None = None,
    ) -> None:
        self.env = env
        clock_s = self.clock_s
        self.api = create_app(
            env.driver,
            env.admin,
            auth=StaticTokenAuth(["admin"]),
            metrics=RecordingMetrics(),
            checkpoint_capabilities=CapabilitySigner(SECRET, clock=clock_s),
        )
        self.api_adapter = ApiAdapter(self.api, fault)
        self.api_session = api_session = requests.Session()
        api_session.mount(API_URL, self.api_adapter)
        options = ExecutorOptions(sleep=lambda _seconds: None)

        def handle(raw: dict[str, Any]) -> tuple[int, dict[str, Any]]:
            """The host's step handler (its checkpoint calls reach the API)."""
            answer: tuple[int, dict[str, Any]] = handle_step_request(
                raw,
                services=services,
                now_ms=env.clock.now_ms,
                options=options,
                checkpoint_session=api_session,
            )
            return answer

        self.handle = handle
        host = StepHost(handler=handle, signer=RequestSigner(SECRET, clock=clock_s))
        self.host_adapter = WsgiAdapter(make_wsgi_app(host))
        host_session = requests.Session()
        host_session.mount(HOST_URL, self.host_adapter)
        self.dispatcher = HttpDispatcher(
            HOST_URL,
            secret=SECRET,
            session=host_session,
            retry=TransportRetry(retries=2, sleep=lambda _seconds: None),
            clock=clock_s,
            checkpoint_url=API_URL if checkpoints else None,
        )
        env.engine.dispatchers = DispatcherResolver(default=self.dispatcher)

    def clock_s(self) -> float:
        """The virtual time in seconds (signatures and capabilities)."""
        return self.env.clock.now_ms() / 1000
