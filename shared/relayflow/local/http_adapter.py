"""Serves a Lambda HTTP handler on 127.0.0.1: each request becomes an API Gateway v2 event.

This is how the local stack puts the same api handler that runs behind API Gateway on a port.
The server is waitress (threaded, with a listen backlog and read timeouts, see
``http_server``); this module turns its WSGI requests into events and answers back.
"""

from __future__ import annotations

import base64
import errno
import json
import logging
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from http import HTTPStatus
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, quote, unquote, urlsplit

from waitress.adjustments import Adjustments

from relayflow.local.http_server import JsonErrorServer, json_error_body

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIEnvironment

from relayflow.clock import utc_now

LambdaHandler = Callable[[dict[str, Any], Any], Mapping[str, Any]]

#: API Gateway refuses bodies over 10 MB before they reach the function.
MAX_REQUEST_BYTES = 10 * 1024 * 1024
#: Longer request targets answer 414; the API's longest (a run id and a page cursor) is far
#: shorter, and common proxies refuse targets over 8 KB.
MAX_URL_BYTES = 8 * 1024
#: The methods API Gateway forwards to a function (an HTTP API route's ``ANY``).
METHODS = ("DELETE", "GET", "HEAD", "OPTIONS", "PATCH", "POST", "PUT")
#: Connections the kernel queues while every worker is busy.
LISTEN_BACKLOG = 1024
#: Requests answered at once (a ``waitMs`` poll holds one for up to 25 s).
DEFAULT_THREADS = 32
#: Seconds a request may take to arrive in full (408 after) and an idle connection stays open.
DEFAULT_READ_TIMEOUT_S = 30
_JSON = ("Content-Type", "application/json")
#: Headers a WSGI application must not set (PEP 3333); the server manages them.
_HOP_BY_HOP = frozenset(
    {
        "connection",
        "content-length",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "trailers",
        "transfer-encoding",
        "upgrade",
    }
)


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
    raw_path, raw_query = _split_target(target)
    lowered: dict[str, str] = {}
    for name, value in headers.items():
        key = name.lower()
        lowered[key] = f"{lowered[key]},{value}" if key in lowered else value
    query: dict[str, str] = {}
    for key, value in parse_qsl(raw_query, keep_blank_values=True):
        query[key] = f"{query[key]},{value}" if key in query else value
    now = utc_now()
    request_id = str(uuid.uuid4())
    is_text = _is_text(lowered.get("content-type", ""), body)
    event: dict[str, Any] = {
        "version": "2.0",
        "routeKey": "$default",
        "rawPath": raw_path,
        "rawQueryString": raw_query,
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


def _split_target(target: str) -> tuple[str, str]:
    """``(path, query)`` of a request target, the path exactly as sent.

    An origin-form target (``/path?query``) is split at its first ``?``: a path that starts
    with ``//`` is a path, not a host. An absolute-form one (``http://host/path``) loses its
    scheme and host.
    """
    target = target.split("#", 1)[0]
    if not target.startswith("/"):
        try:
            parts = urlsplit(target)
        except ValueError:
            return "/", ""
        return parts.path or "/", parts.query
    path, _, query = target.partition("?")
    return path, query


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
        handler: ``handler(event, context)`` taking API Gateway v2 events; called from
            several threads at once.
        host: Address to bind (loopback by default).
        port: Port to bind; 0 picks a free one.
        function_name: Name reported in the Lambda context.
        on_error: Called with an exception the handler raised (the client then gets a 502,
            as from API Gateway).
        threads: Requests answered at once; more wait in line.
        read_timeout_s: Seconds a request may take to arrive in full (then 408
            ``request_timeout``); idle keep-alive connections close after as long.

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
        threads: int = DEFAULT_THREADS,
        read_timeout_s: int = DEFAULT_READ_TIMEOUT_S,
    ) -> None:
        self.handler = handler
        self.function_name = function_name
        self.on_error = on_error
        settings = Adjustments(
            host=host,
            port=port,
            threads=threads,
            backlog=LISTEN_BACKLOG,
            channel_timeout=read_timeout_s,
            # How often idle and half-received connections are looked at.
            cleanup_interval=max(1, min(read_timeout_s, 30) // 2),
            connection_limit=max(100, 4 * threads),
            max_request_body_size=MAX_REQUEST_BYTES,
            # A reset from a client that went away is not the server's error.
            log_socket_errors=False,
            ident="relayflow-local",
            expose_tracebacks=False,
        )
        # waitress warns each time a request waits for a free worker: waiting in line is
        # what the worker count is for, not a problem to report.
        logging.getLogger("waitress.queue").setLevel(logging.ERROR)
        try:
            self._server = JsonErrorServer(self.wsgi_app, settings)
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise PortInUseError(host, port) from exc
            raise

    @property
    def port(self) -> int:
        """The bound port."""
        return self._server.address[1]

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>``."""
        return f"http://{self._server.address[0]}:{self.port}"

    def start(self) -> None:
        """Serve in a background thread."""
        self._server.start(name="relayflow-api-http")

    def stop(self) -> None:
        """Stop serving and release the port."""
        self._server.stop()

    def wsgi_app(self, environ: WSGIEnvironment, start_response: StartResponse) -> list[bytes]:
        """The WSGI application: one request, one handler call."""
        status, headers, data = self._answer(environ)
        kept = [(k, v) for k, v in headers if k.lower() not in _HOP_BY_HOP]
        kept.append(("Content-Length", str(len(data))))
        start_response(_status_line(status), kept)
        # A HEAD answer has the headers of the GET one and no body; leaving it out is the
        # application's job under WSGI.
        return [] if environ.get("REQUEST_METHOD") == "HEAD" else [data]

    def _answer(self, environ: WSGIEnvironment) -> tuple[int, list[tuple[str, str]], bytes]:
        method = str(environ.get("REQUEST_METHOD", "GET")).upper()
        target = _request_target(environ)
        if method not in METHODS:
            allow = ", ".join(METHODS)
            message = f"{method} is not supported; use one of {allow}"
            return 405, [_JSON, ("Allow", allow)], json_error_body(405, message)
        if len(target.encode("latin-1", "replace")) > MAX_URL_BYTES:
            message = f"the request URL is longer than {MAX_URL_BYTES} bytes"
            return 414, [_JSON], json_error_body(414, message)
        body = environ["wsgi.input"].read()
        event = build_http_api_event(
            method,
            target,
            _request_headers(environ),
            body,
            source_ip=str(environ.get("REMOTE_ADDR") or "127.0.0.1"),
        )
        return self._invoke(event)

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
            return 502, [_JSON], body.encode()


def _request_target(environ: WSGIEnvironment) -> str:
    """The path and query as the client sent them."""
    raw = environ.get("REQUEST_URI")
    if isinstance(raw, str) and raw.startswith("/"):
        return raw
    path = quote(str(environ.get("PATH_INFO") or "/"), safe="/%:@!$&'()*+,;=-._~")
    query = str(environ.get("QUERY_STRING") or "")
    return f"{path}?{query}" if query else path


def _request_headers(environ: WSGIEnvironment) -> dict[str, str]:
    """The request headers from a WSGI environment (names lower-cased)."""
    headers: dict[str, str] = {}
    for key, value in environ.items():
        if key.startswith("HTTP_"):
            headers[key[5:].replace("_", "-").lower()] = str(value)
        elif key in ("CONTENT_TYPE", "CONTENT_LENGTH") and value:
            headers[key.replace("_", "-").lower()] = str(value)
    return headers


def _status_line(status: int) -> str:
    try:
        return f"{status} {HTTPStatus(status).phrase}"
    except ValueError:
        return f"{status} Unknown"
