"""The stack's own AWS requests handed to the moto server's WSGI app in this process.

The moto server runs in the stack's process, so a request of the stack's own clients over
127.0.0.1 pays for a socket round trip and werkzeug's HTTP parsing on both sides, all under
the one GIL, for nothing. The same signed request goes straight to the server's app instead:
the same routing, the same gate (:func:`relayflow.local.state.gate_moto_server`) and the same
atomic backends. Tools outside the process still reach the server on its port.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

import boto3
from botocore.awsrequest import AWSPreparedRequest, AWSResponse, HTTPHeaders
from moto.core.botocore_stubber import MockRawResponse
from werkzeug.test import EnvironBuilder, run_wsgi_app


class DirectMoto:
    """Serves the requests of a boto3 session's clients by calling the moto server's app.

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
        environ = EnvironBuilder(
            method=request.method,
            base_url=f"{url.scheme}://{url.netloc}",
            path=url.path or "/",
            query_string=url.query,
            headers=[(str(k), _text(v)) for k, v in request.headers.items()],
            data=bytes(body) if isinstance(body, bytearray) else body,
        ).get_environ()
        app_iter, status, headers = run_wsgi_app(self._server._server.app, environ)
        try:
            content = b"".join(app_iter)
        finally:
            close = getattr(app_iter, "close", None)
            if close is not None:
                close()
        status_code = int(str(status).split(" ", 1)[0])
        answer_headers = HTTPHeaders()
        for name, value in headers.items():
            answer_headers[name] = value
        return AWSResponse(request.url, status_code, answer_headers, MockRawResponse(content))


def _text(value: str | bytes) -> str:
    return value.decode("latin-1") if isinstance(value, bytes) else value
