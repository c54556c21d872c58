"""A waitress WSGI server that answers its own errors as JSON and stops on demand.

waitress reads each request in full on its event loop before a worker thread sees it, so a
slow or truncated body holds no thread. Three things are adapted here:

- the errors waitress produces itself (bad ``Content-Length``, headers or body too large...)
  answer ``{"error": code, "message": ...}`` like the API, instead of plain text;
- a request that is not received in full within the read timeout answers 408
  ``request_timeout`` (waitress would close the connection without a word);
- the event loop runs in a thread that :meth:`JsonErrorServer.stop` ends cleanly.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, cast

from waitress import wasyncore
from waitress.adjustments import Adjustments
from waitress.channel import HTTPChannel
from waitress.server import TcpWSGIServer
from waitress.task import ErrorTask
from waitress.utilities import Error

from relayflow.clock import wall_s

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIEnvironment

WsgiApp = Callable[["WSGIEnvironment", "StartResponse"], Iterable[bytes]]

#: The ``error`` code of each status the server itself may refuse a request with.
ERROR_CODES = {
    400: "bad_request",
    405: "method_not_allowed",
    408: "request_timeout",
    413: "payload_too_large",
    414: "uri_too_long",
    431: "headers_too_large",
    500: "internal_error",
    501: "not_implemented",
}


class RequestTimeout(Error):
    """The request was not received in full within the read timeout."""

    code = 408
    reason = "Request Timeout"


def json_error_body(status: int, message: str) -> bytes:
    """The JSON body of an error the server itself answers."""
    code = ERROR_CODES.get(status, "bad_request" if status < 500 else "internal_error")
    return json.dumps({"error": code, "message": message}).encode()


class _JsonErrorTask(ErrorTask):
    """waitress's error answer, with a JSON body."""

    def execute(self) -> None:
        task = cast(Any, self)  # waitress's stubs miss the parser's ``error``
        error: Error = task.request.error
        body = json_error_body(error.code, _error_message(error))
        self.status = f"{error.code} {error.reason}"
        task.response_headers.append(("Content-Type", "application/json"))
        self.set_close_on_finish()
        self.content_length = len(body)
        self.write(body)


def _error_message(error: Error) -> str:
    if isinstance(error, RequestTimeout):
        return str(error.body)
    detail = str(error.body or "").strip()
    reason = error.reason.lower()
    return f"{reason}: {detail}" if detail else reason


class _Channel(HTTPChannel):
    """A connection whose errors answer JSON and whose partial request can time out."""

    error_task_class = _JsonErrorTask

    def answer_timeout(self) -> bool:
        """Answer 408 to the request being received, if there is one (event loop thread)."""
        state = cast(Any, self)
        with state.requests_lock:
            request = self.request
            if request is None or self.will_close or self.close_when_flushed:
                return False
            timeout = self.adj.channel_timeout
            message = f"the request was not received in full within {timeout} s"
            request.error = RequestTimeout(message)
            request.completed = True
            self.request = None
            state.requests.append(request)
            self.last_activity = wall_s()
        self.server.add_task(cast(Any, self))
        return True


class JsonErrorServer(TcpWSGIServer):
    """waitress's TCP server with :class:`_Channel` connections and a stoppable loop.

    Args:
        app: The WSGI application.
        adj: waitress settings (``host``, ``port``, ``threads``, ``backlog``,
            ``channel_timeout``...).

    Raises:
        OSError: The address cannot be bound.
    """

    channel_class = _Channel

    def __init__(self, app: WsgiApp, adj: Adjustments) -> None:
        self.socket_map: dict[int, Any] = {}
        super().__init__(app, map=self.socket_map, adj=adj)
        if self.socket is None:  # waitress created and bound it above
            raise OSError("the server socket was not created")
        host, port = self.socket.getsockname()[:2]
        #: The bound address (the port is known when 0 was asked for).
        self.address: tuple[str, int] = (str(host), int(port))
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    def maintenance(self, now: float) -> None:
        """Close idle connections; a request still arriving after the timeout answers 408."""
        cutoff = now - self.adj.channel_timeout
        channels = cast(dict[int, _Channel], self.active_channels)
        for channel in list(channels.values()):
            if channel.requests or channel.last_activity >= cutoff:
                continue
            if not channel.answer_timeout():
                channel.will_close = True

    def start(self, name: str) -> None:
        """Run the event loop in a daemon thread called ``name``."""
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self._thread.start()

    def stop(self, timeout_s: int = 5) -> None:
        """End the event loop, close every connection and the port, stop the workers."""
        self._stopping.set()
        if self._thread is not None:
            self.pull_trigger()  # wakes the loop's poll so it sees the flag
            self._thread.join(timeout=timeout_s)
            self._thread = None
        self.task_dispatcher.shutdown(cancel_pending=True, timeout=timeout_s)
        # Closed here, once the loop and the workers are gone: the loop must not poll a closed
        # descriptor, and a finishing worker still pulls the trigger.
        wasyncore.close_all(self.socket_map)

    def _loop(self) -> None:
        while not self._stopping.is_set():
            wasyncore.loop(
                timeout=self.adj.asyncore_loop_timeout, use_poll=True, map=self.socket_map, count=1
            )
