"""``relayflow dev --dispatch-url``: the stack drives workflows hosted by another process.

The step host is a relayflow WSGI host served by this test process on a free port; the dev
stack (a subprocess) signs each step request with the shared secret and POSTs it there.
"""

from __future__ import annotations

import json
import os
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

import pytest
import requests
from dev_process import free_port, start_dev

from relayflow.sdk import registry
from relayflow.worker.hosts import make_wsgi_app

SECRET = "remote-host-secret"
TOKEN = "remote-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
FLOWS = """
import os

from relayflow import workflow


@workflow(id="remote.where")
async def where(data, ctx):
    await ctx.sleep("1s")
    pid = await ctx.step("pid", lambda: os.getpid())
    return {"pid": pid, "echo": data}
"""


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def remote_flows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Only ``remote_flows`` registered while the test runs; the workflows other modules
    registered when imported are registered again after it."""
    saved = dict(registry._REGISTRY)
    (tmp_path / "remote_flows.py").write_text(textwrap.dedent(FLOWS))
    monkeypatch.syspath_prepend(str(tmp_path))
    registry.reset_registry()
    __import__("remote_flows")
    try:
        yield
    finally:
        sys.modules.pop("remote_flows", None)
        registry.reset_registry()
        registry._REGISTRY.update(saved)


@pytest.fixture
def remote_host(remote_flows: None) -> Iterator[str]:
    port = free_port()
    server: WSGIServer = make_server(
        "127.0.0.1", port, make_wsgi_app(secret=SECRET), handler_class=_QuietHandler
    )
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{port}/steps"
    finally:
        server.shutdown()
        server.server_close()


def _run_to_completion(url: str, data: dict[str, Any]) -> dict[str, Any]:
    """Start ``remote.where`` on the stack at ``url`` and poll it until it completes."""
    answer = requests.post(
        f"{url}/api/runs",
        json={"workflowId": "remote.where", "input": data},
        headers=AUTH,
        timeout=30,
    )
    assert answer.status_code == 201, answer.text
    run: dict[str, Any] = answer.json()
    deadline = time.monotonic() + 30
    while run["status"] != "completed":
        assert run["status"] in ("running", "waiting"), run
        assert time.monotonic() < deadline, run
        time.sleep(0.1)
        run = requests.get(f"{url}/api/runs/{run['id']}", headers=AUTH, timeout=10).json()
    return run


def test_the_dev_stack_drives_a_workflow_hosted_over_http(remote_host: str, tmp_path: Path) -> None:
    dev = start_dev(
        "--token", TOKEN, "--dispatch-url", remote_host, "--signing-secret", SECRET,
        app="remote_flows", cwd=tmp_path, state_dir=tmp_path / "state",
    )  # fmt: skip
    try:
        assert f"  step host    {remote_host} (signing: relayflow)" in dev.output()
        run = _run_to_completion(dev.url, {"n": 1})
        # The step ran here, in the host's process, not in the dev stack's.
        assert run["output"] == {"pid": os.getpid(), "echo": {"n": 1}}
    finally:
        try:
            dev.interrupt()
        finally:
            dev.kill()


def test_a_wrong_secret_is_refused_by_the_host(remote_host: str, tmp_path: Path) -> None:
    dev = start_dev(
        "--token", TOKEN, "--dispatch-url", remote_host, "--signing-secret", "not-the-secret",
        app="remote_flows", cwd=tmp_path, state_dir=tmp_path / "state",
    )  # fmt: skip
    try:
        answer = requests.post(
            f"{dev.url}/api/runs",
            json={"workflowId": "remote.where", "input": {}, "waitMs": 5000},
            headers=AUTH,
            timeout=30,
        )
        assert answer.status_code == 201, answer.text
        run = answer.json()
        assert run["status"] == "failed", run
        assert "401" in run["error"]["message"] or "unauthorized" in str(run["error"]).lower()
    finally:
        try:
            dev.interrupt()
        finally:
            dev.kill()


class _CheckpointCalls(requests.Session):
    """The host's session for checkpoint calls, recording each entry's kind and answer's
    status."""

    def __init__(self) -> None:
        super().__init__()
        self.statuses: list[int] = []
        self.kinds: list[str] = []

    def request(self, *args: Any, **kwargs: Any) -> requests.Response:  # type: ignore[override]
        response = super().request(*args, **kwargs)
        self.statuses.append(response.status_code)
        body = kwargs.get("data") or b"{}"
        self.kinds.append(json.loads(body).get("kind", "?"))
        return response


def test_with_http_checkpoints_the_host_makes_each_step_durable_through_the_stack(
    tmp_path: Path, remote_flows: None
) -> None:
    from relayflow.worker import handle_step_request
    from relayflow.worker.hosts import make_step_host

    calls = _CheckpointCalls()

    def handler(raw: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        answer: tuple[int, dict[str, Any]] = handle_step_request(raw, checkpoint_session=calls)
        return answer

    port = free_port()
    host = make_step_host(secret=SECRET, handler=handler)
    server = make_server("127.0.0.1", port, make_wsgi_app(host), handler_class=_QuietHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    dev = start_dev(
        "--token", TOKEN, "--dispatch-url", f"http://127.0.0.1:{port}/steps",
        "--signing-secret", SECRET, "--http-checkpoints",
        app="remote_flows", cwd=tmp_path, state_dir=tmp_path / "state",
    )  # fmt: skip
    try:
        assert "  checkpoints  per step, through this stack's API" in dev.output()
        run = _run_to_completion(dev.url, {"n": 2})
        assert run["output"] == {"pid": os.getpid(), "echo": {"n": 2}}
        # Each invocation (before and after the sleep) claimed its slot first, then the one
        # step was posted to the stack's checkpoint route and stored there.
        assert calls.kinds == ["claim", "claim", "step"]
        assert calls.statuses == [200, 200, 200]
    finally:
        try:
            dev.interrupt()
        finally:
            dev.kill()
            server.shutdown()
            server.server_close()
