"""Step hosts reached over real transports in process: an HTTP host (``requests`` adapter in
front of the WSGI step host) and a Lambda service (a botocore hook that answers ``Invoke`` by
running the Lambda step host), each failing a scripted number of times first."""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import urlsplit

import requests
from botocore.awsrequest import AWSResponse
from fault_injection import aws_response
from requests.adapters import BaseAdapter

from relayflow.worker import ExecutorOptions, handle_step_request
from relayflow.worker.hosts import StepHost, make_lambda_handler, make_step_host, make_wsgi_app

#: A scripted failure: an HTTP status (with optional headers) or an exception to raise.
Fault = int | tuple[int, dict[str, str]] | BaseException


def step_handler(
    now_ms: Callable[[], int], services: Mapping[str, object] | None = None
) -> Callable[[dict[str, Any]], tuple[int, dict[str, Any]]]:
    """The step host's request handler on a virtual clock (retry waits do not sleep)."""
    options = ExecutorOptions(sleep=lambda _seconds: None)

    def handle(raw: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        answer: tuple[int, dict[str, Any]] = handle_step_request(
            raw, services=services, now_ms=now_ms, options=options
        )
        return answer

    return handle


class WsgiHostAdapter(BaseAdapter):
    """A ``requests`` transport that serves POSTs with a WSGI step host, after ``faults``."""

    def __init__(self, host: StepHost, faults: list[Fault] | None = None) -> None:
        super().__init__()
        self.app = make_wsgi_app(host)
        self.faults = list(faults or [])
        self.requests = 0
        self.injected = 0

    def send(  # type: ignore[override]
        self, request: requests.PreparedRequest, **_: Any
    ) -> requests.Response:
        self.requests += 1
        if self.faults:
            fault = self.faults.pop(0)
            self.injected += 1
            if isinstance(fault, BaseException):
                raise fault
            status, headers = fault if isinstance(fault, tuple) else (fault, {})
            return _response(
                request, status, b'{"error":"unavailable","message":"try later"}', headers
            )
        body = request.body if isinstance(request.body, bytes) else (request.body or "").encode()
        url = urlsplit(request.url or "")
        environ: dict[str, Any] = {
            "REQUEST_METHOD": request.method or "POST",
            "PATH_INFO": url.path,
            "QUERY_STRING": url.query,
            "CONTENT_LENGTH": str(len(body)),
            "CONTENT_TYPE": request.headers.get("content-type", ""),
            "wsgi.input": io.BytesIO(body),
        }
        for name, value in request.headers.items():
            environ["HTTP_" + name.upper().replace("-", "_")] = value
        started: list[Any] = []
        chunks = self.app(environ, lambda status, headers: started.extend([status, headers]))
        status = int(str(started[0]).split()[0])
        return _response(request, status, b"".join(chunks), dict(started[1]))

    def close(self) -> None:
        """Nothing to release."""


def _response(
    request: requests.PreparedRequest, status: int, body: bytes, headers: Mapping[str, str]
) -> requests.Response:
    response = requests.Response()
    response.status_code = status
    response._content = body
    response.headers.update(headers)
    response.url = request.url or ""
    response.request = request
    return response


def http_session(adapter: WsgiHostAdapter) -> requests.Session:
    """A session whose every request goes to ``adapter``."""
    session = requests.Session()
    session.mount("https://", adapter)
    session.mount("http://", adapter)
    return session


class LambdaService:
    """Answers a boto3 Lambda client's ``Invoke`` by running the Lambda step host in process
    (moto never runs code), after the scripted ``faults`` (HTTP statuses of the Lambda API,
    or ``"Unhandled"`` for a function that crashed)."""

    def __init__(self, handler: Callable[[dict[str, Any]], tuple[int, dict[str, Any]]]) -> None:
        self.lambda_handler = make_lambda_handler(make_step_host(handler=handler))
        self.faults: list[int | str] = []
        self.invocations = 0
        self.injected = 0

    def install(self, client: Any) -> None:
        """Answer ``client``'s Invoke calls (registered ahead of moto)."""
        client.meta.events.register_first("before-send.lambda.Invoke", self._answer)

    def _answer(self, request: Any, **_: Any) -> AWSResponse:
        self.invocations += 1
        if self.faults:
            fault = self.faults.pop(0)
            self.injected += 1
            if isinstance(fault, str):
                crash = json.dumps({"errorMessage": "Process exited", "errorType": "Runtime"})
                headers = {"X-Amz-Function-Error": fault}
                return aws_response(request.url, 200, headers, crash.encode())
            code = "TooManyRequestsException" if fault == 429 else "ServiceException"
            body = json.dumps({"Type": "Service", "message": f"injected {code}"}).encode()
            headers = {"x-amzn-ErrorType": code, "Content-Type": "application/json"}
            return aws_response(request.url, fault, headers, body)
        event = json.loads(request.body)
        answer = self.lambda_handler(event, None)
        return aws_response(
            request.url, 200, {"Content-Type": "application/json"}, json.dumps(answer).encode()
        )
