"""``relayflow dev`` as a production user runs it, for the figures measured over HTTP.

The stack runs in a child process (the waitress api, the moto server with the atomic shim,
the drive and worker functions on local threads, exactly what ``make dev`` starts) hosting
a bench module of workflows as the user's app (``bench.time_workflows`` unless told);
requests go to it over real HTTP connections.
"""

from __future__ import annotations

import http.client
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import TracebackType
from typing import Any
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parents[1]
APP = "bench.time_workflows"
READY_TIMEOUT_S = 120.0
#: How long a client waits for one answer; far above every target, so a slow answer is
#: measured rather than cut off.
REQUEST_TIMEOUT_S = 120.0


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class DevStack:
    """A ``relayflow dev`` child process on free ports, with a fresh state folder."""

    def __init__(self, app: str = APP) -> None:
        self.app = app
        self.token = f"bench-{secrets.token_hex(8)}"
        self.port = _free_port()
        self._process: subprocess.Popen[bytes] | None = None
        self._state_dir = tempfile.mkdtemp(prefix="relayflow-bench-state-")
        # The child's console, read back when it fails; closed on exit.
        self._log = tempfile.TemporaryFile()  # noqa: SIM115

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> DevStack:
        env = {k: v for k, v in os.environ.items() if not k.startswith("RELAYFLOW_")}
        env["RELAYFLOW_DEV_STATE"] = self._state_dir
        command = [
            sys.executable, "-m", "relayflow.cli", "dev", "--app", self.app,
            "--port", str(self.port), "--moto-port", str(_free_port()), "--token", self.token,
        ]  # fmt: skip
        self._process = subprocess.Popen(
            command, cwd=ROOT, env=env, stdout=self._log, stderr=subprocess.STDOUT
        )
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise RuntimeError(f"relayflow dev exited early:\n{self._output()}")
            try:
                if self.request("GET", "/api/healthz", timeout_s=2)[0] == 200:
                    return self
            except OSError:
                pass
            time.sleep(0.2)
        self.__exit__(None, None, None)
        raise RuntimeError(f"relayflow dev not ready in {READY_TIMEOUT_S:.0f} s")

    def _output(self) -> str:
        self._log.seek(0)
        return self._log.read().decode(errors="replace")

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        process = self._process
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGINT)
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)
        self._log.close()
        shutil.rmtree(self._state_dir, ignore_errors=True)

    def request_post(self, path: str, body: Any) -> tuple[int, Any]:
        """``POST path`` with a JSON body."""
        return self.request("POST", path, body)

    def request(
        self, method: str, path: str, body: Any = None, *, timeout_s: float = REQUEST_TIMEOUT_S
    ) -> tuple[int, Any]:
        """One request on a new connection (as separate clients would send it)."""
        parts = urlsplit(self.url)
        connection = http.client.HTTPConnection(
            parts.hostname or "127.0.0.1", parts.port, timeout=timeout_s
        )
        try:
            payload = None if body is None else json.dumps(body).encode()
            headers = {"authorization": f"Bearer {self.token}"}
            if payload is not None:
                headers["content-type"] = "application/json"
            connection.request(method, path, body=payload, headers=headers)
            answer = connection.getresponse()
            raw = answer.read()
            return answer.status, json.loads(raw) if raw else None
        finally:
            connection.close()
