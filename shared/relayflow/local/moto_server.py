"""moto's threaded server on 127.0.0.1, configured for the local stack (no Docker, no log).

Its request threads share this process's moto backends, so the server applies each request
atomically as AWS does (see :func:`relayflow.testing.aws.atomic_requests`)."""

from __future__ import annotations

import logging
import socket
from contextlib import AbstractContextManager
from dataclasses import dataclass, field

import requests
from moto.server import ThreadedMotoServer

from relayflow.local.http_adapter import PortInUseError
from relayflow.testing.aws import atomic_requests

#: Fake credentials: the local stack must never reach real AWS.
FAKE_CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
}
DEFAULT_REGION = "us-east-1"


def ensure_port_free(host: str, port: int) -> None:
    """Raise :class:`PortInUseError` when something listens on ``host:port``.

    moto's server binds in a background thread and would hang on a taken port, so the port is
    probed first (with the same address-reuse option the server uses).
    """
    if port == 0:
        return
    probe = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        probe.bind((host, port))
    except OSError as exc:
        raise PortInUseError(host, port) from exc
    finally:
        probe.close()


@dataclass
class LocalMoto:
    """A running moto server.

    Attributes:
        server: moto's ``ThreadedMotoServer``.
        endpoint_url: ``http://127.0.0.1:<port>``.
    """

    server: ThreadedMotoServer
    endpoint_url: str
    atomic: AbstractContextManager[None] | None = field(default=None, repr=False)

    def stop(self) -> None:
        """Stop the server and release its port."""
        try:
            self.server.stop()
            inner = getattr(self.server, "_server", None)
            if inner is not None:
                inner.server_close()
        finally:
            if self.atomic is not None:
                self.atomic.__exit__(None, None, None)
                self.atomic = None


def start_moto(host: str = "127.0.0.1", port: int = 5050) -> LocalMoto:
    """Start moto's server on ``host:port`` with Lambda's Docker use turned off.

    Raises:
        PortInUseError: The port is taken.
    """
    # werkzeug logs every request moto serves; the stack logs run transitions instead.
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    ensure_port_free(host, port)
    atomic = atomic_requests()
    atomic.__enter__()
    server = ThreadedMotoServer(ip_address=host, port=port, verbose=False)
    local = LocalMoto(server=server, endpoint_url="", atomic=atomic)
    try:
        server.start()
        bound_host, bound_port = server.get_host_and_port()
        local.endpoint_url = f"http://{bound_host}:{bound_port}"
        answer = requests.post(
            f"{local.endpoint_url}/moto-api/config",
            json={"lambda": {"use_docker": False}},
            timeout=10,
        )
        answer.raise_for_status()
    except BaseException:
        local.stop()
        raise
    return local
