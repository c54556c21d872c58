"""A scripted HTTP server on 127.0.0.1 standing in for a relayflow deployment."""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

Reply = tuple[int, Any]
Responder = Callable[["Recorded"], Reply]


@dataclass
class Recorded:
    """One request the fake API received."""

    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: Any


@dataclass
class FakeApi:
    """Routes ``(METHOD, path)`` to scripted answers and records every request."""

    url: str = ""
    routes: dict[tuple[str, str], Responder | list[Reply] | Reply] = field(default_factory=dict)
    requests: list[Recorded] = field(default_factory=list)

    def on(self, method: str, path: str, reply: Responder | list[Reply] | Reply) -> None:
        """Answer ``method path`` with a fixed reply, a list consumed in order, or a callable."""
        self.routes[(method, path)] = reply

    def answer(self, req: Recorded) -> Reply:
        route = self.routes.get((req.method, req.path))
        if route is None:
            return 404, {"error": "route_not_found", "message": f"no route {req.path}"}
        if callable(route):
            return route(req)
        if isinstance(route, list):
            return route.pop(0) if len(route) > 1 else route[0]
        return route

    def last(self, method: str, path: str) -> Recorded:
        matches = [r for r in self.requests if r.method == method and r.path == path]
        assert matches, f"no {method} {path} in {[(r.method, r.path) for r in self.requests]}"
        return matches[-1]


def _handler_for(api: FakeApi) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def _serve(self) -> None:
            parts = urlsplit(self.path)
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length) if length else b""
            req = Recorded(
                method=self.command,
                path=parts.path,
                query=parse_qs(parts.query),
                headers={k.lower(): v for k, v in self.headers.items()},
                body=json.loads(raw) if raw else None,
            )
            api.requests.append(req)
            status, body = api.answer(req)
            data = json.dumps(body).encode() if not isinstance(body, bytes) else body
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = _serve
        do_POST = _serve

        def log_message(self, format: str, *args: Any) -> None:
            return

    return Handler


@contextlib.contextmanager
def serve_fake_api() -> Iterator[FakeApi]:
    """Run a :class:`FakeApi` on a free loopback port for the duration of the block."""
    api = FakeApi()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(api))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    api.url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        yield api
    finally:
        server.shutdown()
        server.server_close()
