"""The stack's own AWS requests handed to the moto server in this process.

The moto server runs in the stack's process, so a request of the stack's own clients over
127.0.0.1 pays for a socket round trip and werkzeug's HTTP parsing on both sides, all under
the one GIL, for nothing. The same signed request goes to the server's app instead, under
the same gate (:func:`relayflow.local.state.gate_moto_server`) and to the same atomic
backends. A DynamoDB request, most of the stack's, goes straight to moto's DynamoDB handler,
the one view the server's app routes every DynamoDB request to, without the app's service
lookup and Flask's request handling around it. Tools outside the process still reach the
server on its port.
"""

from __future__ import annotations

import contextlib
from typing import Any
from urllib.parse import urlsplit

import boto3
from botocore.awsrequest import AWSPreparedRequest, AWSResponse, HTTPHeaders
from botocore.exceptions import ClientError
from moto.core.botocore_stubber import MockRawResponse
from moto.core.request import Request
from moto.dynamodb.responses import DynamoHandler
from moto.moto_api import recorder
from werkzeug.exceptions import HTTPException
from werkzeug.test import EnvironBuilder, run_wsgi_app

from relayflow.local.state import GatedApp

#: The ``X-Amz-Target`` prefix of DynamoDB's API (its streams API has another).
_DYNAMODB_TARGET = "DynamoDB_20120810."


class DirectMoto:
    """Serves the requests of a boto3 session's clients by calling the moto server in process.

    Args:
        server: moto's started ``ThreadedMotoServer``; its app is looked up per request, so
            a gate wrapped around it later applies.
        endpoint_url: The server's ``http://host:port``; requests to other hosts go out as
            usual.
    """

    def __init__(self, server: Any, endpoint_url: str) -> None:
        self._server = server
        self._netloc = urlsplit(endpoint_url).netloc

    def attach(self, session: boto3.Session) -> None:
        """Serve the clients ``session`` creates from now on."""
        session.events.register("before-send", self._send)  # type: ignore[arg-type]

    def _send(self, request: AWSPreparedRequest, **_: Any) -> AWSResponse | None:
        url = urlsplit(request.url)
        if url.netloc != self._netloc:
            return None
        raw = request.body
        body = (
            raw.read() if raw is not None and not isinstance(raw, str | bytes | bytearray) else raw
        )
        if isinstance(body, bytearray):
            body = bytes(body)
        if _text(request.headers.get("X-Amz-Target", "")).startswith(_DYNAMODB_TARGET):
            status, headers, content = self._dynamodb(request, body)
        else:
            status, headers, content = self._wsgi(request, body)
        answer_headers = HTTPHeaders()
        for name, value in headers.items():
            answer_headers[name] = value
        return AWSResponse(request.url, status, answer_headers, MockRawResponse(content))

    def _wsgi(
        self, request: AWSPreparedRequest, body: str | bytes | None
    ) -> tuple[int, Any, bytes]:
        url = urlsplit(request.url)
        environ = EnvironBuilder(
            method=request.method,
            base_url=f"{url.scheme}://{url.netloc}",
            path=url.path or "/",
            query_string=url.query,
            headers=[(str(k), _text(v)) for k, v in request.headers.items()],
            data=body,
        ).get_environ()
        app_iter, status, headers = run_wsgi_app(self._server._server.app, environ)
        try:
            content = b"".join(app_iter)
        finally:
            close = getattr(app_iter, "close", None)
            if close is not None:
                close()
        return int(str(status).split(" ", 1)[0]), headers, content

    def _dynamodb(
        self, request: AWSPreparedRequest, body: str | bytes | None
    ) -> tuple[int, Any, str | bytes]:
        """What the server's DynamoDB view answers (``moto.core.utils.convert_to_flask_response``
        around ``DynamoHandler.dispatch``), under the server's gate."""
        app = self._server._server.app
        gate = app.gate.hold() if isinstance(app, GatedApp) else contextlib.nullcontext()
        normalized = Request.from_primitives(request.method, request.url, request.headers, body)
        with gate:
            try:
                recorder._record_request(normalized)
                status, headers, content = DynamoHandler.dispatch(
                    normalized, normalized.raw_url, dict(normalized.headers)
                )
            except ClientError as exc:
                status, headers, content = 400, {}, exc.response["Error"]["Message"]
            except HTTPException as exc:
                status, headers, content = exc.code or 500, exc.get_headers(), exc.get_body()
        return int(status), dict(headers), content


def _text(value: str | bytes) -> str:
    return value.decode("latin-1") if isinstance(value, bytes) else value
