"""``relayflow dev`` keeps its state across restarts: a waiting run resumes and completes.

Each stack runs as a subprocess on free ports with its own state folder; waits are bounded
polls.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import requests
from dev_process import ROOT, DevProcess, child_env, cli_command, start_dev

TOKEN = "state-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
# Long enough to be still ahead after the restart: only its alarm can end the sleep (the
# sweeper runs every 30 s and only drives again runs already due).
ORDER = {"id": "o-state", "total": 42, "items": ["book"], "coolingOff": "8s"}
SHIPMENT = {"orderId": "o-state", "carrier": "UPS", "trackingNumber": "1Z999"}


def _run(dev: DevProcess, run_id: str) -> dict[str, Any]:
    answer = requests.get(f"{dev.url}/api/runs/{run_id}", headers=AUTH, timeout=10)
    assert answer.status_code == 200, answer.text
    run: dict[str, Any] = answer.json()
    return run


def _poll(
    dev: DevProcess, run_id: str, done: Callable[[dict[str, Any]], bool], timeout_s: float = 20
) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    run = _run(dev, run_id)
    while not done(run):
        assert time.monotonic() < deadline, f"run {run_id} did not get there: {run}"
        time.sleep(0.1)
        run = _run(dev, run_id)
    return run


def _pending(run: dict[str, Any]) -> list[str]:
    return [w["id"] for w in run.get("pendingWaitpoints", [])]


def _stop(dev: DevProcess) -> None:
    try:
        assert dev.interrupt() == 0, "\n".join(dev.errors)
    finally:
        dev.kill()


def test_a_waiting_run_resumes_after_a_restart_and_completes(tmp_path: Path) -> None:
    state = tmp_path / "state"
    first = start_dev("--token", TOKEN, "--fresh", state_dir=state)
    try:
        answer = requests.post(
            f"{first.url}/api/runs",
            json={"workflowId": "orders.fulfil", "input": ORDER, "idempotencyKey": "k-state"},
            headers=AUTH,
            timeout=30,
        )
        assert answer.status_code == 201, answer.text
        run_id = answer.json()["id"]
        assert _pending(_run(first, run_id)) == ["sleep:0"]
    finally:
        _stop(first)  # the sleep's alarm is still pending: it must survive the restart
    assert (state / "moto.pickle").is_file()

    second = start_dev(state_dir=state)  # no --token: the saved one is kept
    try:
        assert "  state        restored from" in second.output()
        assert f"  token        {TOKEN}" in second.output()
        # The alarm armed before the restart fires now and moves the run to its event wait.
        assert _pending(_run(second, run_id)) == ["sleep:0"]
        _poll(second, run_id, lambda r: _pending(r) == ["event:shipment.created:1"], 30)
        again = requests.post(
            f"{second.url}/api/runs",
            json={"workflowId": "orders.fulfil", "input": ORDER, "idempotencyKey": "k-state"},
            headers=AUTH,
            timeout=30,
        )
        assert (again.status_code, again.json()["id"]) == (200, run_id), "the key was kept"
        sent = subprocess.run(
            cli_command("send-event", "shipment.created", "--run", run_id,
                        "--data", json.dumps(SHIPMENT)),
            cwd=ROOT,
            env=child_env(RELAYFLOW_URL=second.url, RELAYFLOW_TOKEN=TOKEN),
            capture_output=True,
            text=True,
            timeout=30,
        )  # fmt: skip
        assert sent.returncode == 0, sent.stderr
        done = _poll(second, run_id, lambda r: r["status"] == "completed")
        assert done["output"]["label"]["labelId"] == "lbl-o-state"
        manifest = requests.get(f"{second.url}/api/manifests/development", headers=AUTH, timeout=10)
        assert manifest.status_code == 200, manifest.text
    finally:
        _stop(second)


def test_fresh_starts_empty(tmp_path: Path) -> None:
    state = tmp_path / "state"
    first = start_dev("--token", TOKEN, state_dir=state)
    try:
        answer = requests.post(
            f"{first.url}/api/runs",
            json={"workflowId": "orders.fulfil", "input": {**ORDER, "coolingOff": "1h"}},
            headers=AUTH,
            timeout=30,
        )
        assert answer.status_code == 201, answer.text
    finally:
        _stop(first)

    second = start_dev("--token", TOKEN, "--fresh", state_dir=state)
    try:
        assert "  state        empty, saved to" in second.output()
        runs = requests.get(f"{second.url}/api/runs", headers=AUTH, timeout=10).json()
        assert runs["runs"] == []
    finally:
        _stop(second)


def test_a_second_stack_on_the_same_state_exits_2(tmp_path: Path) -> None:
    state = tmp_path / "state"
    first = start_dev("--token", TOKEN, state_dir=state)
    try:
        result = subprocess.run(
            cli_command("dev", "--port", "0", "--moto-port", "0"),
            cwd=ROOT,
            env=child_env(RELAYFLOW_DEV_STATE=str(state)),
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert result.returncode == 2, result.stderr
        assert "another relayflow dev uses the state folder" in result.stderr
    finally:
        _stop(first)
