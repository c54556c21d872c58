"""Serves a Lambda HTTP handler on 127.0.0.1: each request becomes an API Gateway v2 event.

This is how the local stack puts the same api handler that runs behind API Gateway on a port.
"""

from __future__ import annotations

import base64
import errno
import json
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

from relayflow.adapters.memory.clock import utc_now

LambdaHandler = Callable[[dict[str, Any], Any], Mapping[str, Any]]

#: API Gateway refuses bodies over 10 MB before they reach the function.
MAX_REQUEST_BYTES = 10 * 1024 * 1024


class PortInUseError(OSError):
    """The port is already taken by another process."""

    def __init__(self, host: str, port: int) -> None:
        super().__init__(errno.EADDRINUSE, f"port {port} on {host} is already in use")
        self.host = host
        self.port = port


@dataclass
class LocalLambdaContext:
    """The parts of a Lambda context object handlers read."""

    function_name: str
    aws_request_id: str
    timeout_ms: int = 30_000
    memory_limit_in_mb: int = 1024
    function_version: str = "$LATEST"

    def __post_init__(self) -> None:
        self._deadline = time.monotonic() + self.timeout_ms / 1000

    @property
    def invoked_function_arn(self) -> str:
        """A local ARN for the function."""
        return f"arn:aws:lambda:us-east-1:000000000000:function:{self.function_name}"

    @property
    def log_group_name(self) -> str:
        """The log group the function would write to."""
        return f"/aws/lambda/{self.function_name}"

    @property
    def log_stream_name(self) -> str:
        """A fixed local log stream."""
        return "local"

    def get_remaining_time_in_millis(self) -> int:
        """Milliseconds left before the invocation's timeout."""
        return max(0, int((self._deadline - time.monotonic()) * 1000))


def build_http_api_event(
    method: str,
    target: str,
    headers: Mapping[str, str],
    body: bytes,
    *,
    source_ip: str = "127.0.0.1",
) -> dict[str, Any]:
    """The API Gateway HTTP API (payload 2.0) event for one request.

    Args:
        method: HTTP method.
        target: The request target (path and query string, as sent).
        headers: Request headers (names are lower-cased, repeated ones joined with commas).
        body: The raw body.
        source_ip: The client address.
    """
    parts = urlsplit(target)
    raw_path = parts.path or "/"
    lowered: dict[str, str] = {}
    for name, value in headers.items():
        key = name.lower()
        lowered[key] = f"{lowered[key]},{value}" if key in lowered else value
    query: dict[str, str] = {}
    for key, value in parse_qsl(parts.query, keep_blank_values=True):
        query[key] = f"{query[key]},{value}" if key in query else value
    now = utc_now()
    request_id = str(uuid.uuid4())
    is_text = _is_text(lowered.get("content-type", ""), body)
    event: dict[str, Any] = {
        "version": "2.0",
        "routeKey": "$default",
        "rawPath": raw_path,
        "rawQueryString": parts.query,
        "headers": lowered,
        "requestContext": {
            "accountId": "000000000000",
            "apiId": "local",
            "domainName": lowered.get("host", "127.0.0.1"),
            "domainPrefix": "local",
            "http": {
                "method": method.upper(),
                # API Gateway gives the decoded path here and the raw one in rawPath.
                "path": unquote(raw_path),
                "protocol": "HTTP/1.1",
                "sourceIp": source_ip,
                "userAgent": lowered.get("user-agent", ""),
            },
            "requestId": request_id,
            "routeKey": "$default",
            "stage": "$default",
            "time": now.strftime("%d/%b/%Y:%H:%M:%S +0000"),
            "timeEpoch": int(now.timestamp() * 1000),
        },
        "isBase64Encoded": not is_text,
    }
    if query:
        event["queryStringParameters"] = query
    if body:
        event["body"] = body.decode("utf-8") if is_text else base64.b64encode(body).decode()
    cookies = lowered.get("cookie")
    if cookies:
        event["cookies"] = [c.strip() for c in cookies.split(";") if c.strip()]
    return event


def _is_text(content_type: str, body: bytes) -> bool:
    if not body:
        return True
    kind = content_type.split(";")[0].strip().lower()
    if kind and not (kind.startswith("text/") or kind.endswith("json") or "xml" in kind):
        return False
    try:
        body.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _answer_parts(answer: Mapping[str, Any]) -> tuple[int, list[tuple[str, str]], bytes]:
    """Status, headers and body of a Lambda proxy answer (payload 2.0 rules)."""
    if "statusCode" not in answer:
        # A handler that returns a bare value: API Gateway answers it as JSON with 200.
        return 200, [("Content-Type", "application/json")], json.dumps(answer).encode()
    status = int(answer.get("statusCode", 200))
    headers = [(str(k), str(v)) for k, v in (answer.get("headers") or {}).items()]
    for name, values in (answer.get("multiValueHeaders") or {}).items():
        headers.extend((str(name), str(v)) for v in values)
    for cookie in answer.get("cookies") or []:
        headers.append(("Set-Cookie", str(cookie)))
    raw = answer.get("body") or ""
    body = base64.b64decode(raw) if answer.get("isBase64Encoded") else str(raw).encode("utf-8")
    return status, headers, body


class LambdaHttpServer:
    """A threaded HTTP server on ``host:port`` that answers through a Lambda HTTP handler.

    Args:
        handler: ``handler(event, context)`` taking API Gateway v2 events.
        host: Address to bind (loopback by default).
        port: Port to bind; 0 picks a free one.
        function_name: Name reported in the Lambda context.
        on_error: Called with an exception the handler raised (the client then gets a 502,
            as from API Gateway).

    Raises:
        PortInUseError: The port is taken.
    """

    def __init__(
        self,
        handler: LambdaHandler,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        function_name: str = "relayflow-api",
        on_error: Callable[[BaseException], None] | None = None,
    ) -> None:
        self.handler = handler
        self.function_name = function_name
        self.on_error = on_error
        try:
            self._server = ThreadingHTTPServer((host, port), self._request_handler())
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise PortInUseError(host, port) from exc
            raise
        self._server.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        """The bound port."""
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>``."""
        host = self._server.server_address[0]
        return f"http://{host if isinstance(host, str) else host.decode()}:{self.port}"

    def start(self) -> None:
        """Serve in a background thread."""
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="relayflow-api-http", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        """Stop serving and release the port."""
        if self._thread is not None:
            self._server.shutdown()
            self._thread.join(timeout=5)
            self._thread = None
        self._server.server_close()

    def _invoke(self, event: dict[str, Any]) -> tuple[int, list[tuple[str, str]], bytes]:
        context = LocalLambdaContext(
            function_name=self.function_name,
            aws_request_id=event["requestContext"]["requestId"],
        )
        try:
            answer = self.handler(event, context)
            return _answer_parts(answer)
        except Exception as exc:
            if self.on_error is not None:
                self.on_error(exc)
            body = json.dumps({"error": "internal_error", "message": "Internal Server Error"})
            return 502, [("Content-Type", "application/json")], body.encode()

    def _request_handler(self) -> type[BaseHTTPRequestHandler]:
        adapter = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            server_version = "relayflow-local"

            def _serve(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                if length > MAX_REQUEST_BYTES:
                    self._send(413, [("Content-Type", "application/json")], _too_large())
                    self.close_connection = True
                    return
                body = self.rfile.read(length) if length else b""
                event = build_http_api_event(
                    self.command,
                    self.path,
                    dict(self.headers.items()),
                    body,
                    source_ip=self.client_address[0],
                )
                status, headers, data = adapter._invoke(event)
                self._send(status, headers, data)

            def _send(self, status: int, headers: list[tuple[str, str]], data: bytes) -> None:
                self.send_response(status)
                for name, value in headers:
                    if name.lower() not in ("content-length", "connection"):
                        self.send_header(name, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)

            do_GET = _serve
            do_POST = _serve
            do_PUT = _serve
            do_PATCH = _serve
            do_DELETE = _serve
            do_OPTIONS = _serve
            do_HEAD = _serve

            def log_message(self, format: str, *args: Any) -> None:
                return  # one line per run transition is logged elsewhere; no access log

        return Handler


def _too_large() -> bytes:
    body = {"error": "payload_too_large", "message": "request body is too large"}
    return json.dumps(body).encode()
