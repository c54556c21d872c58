"""Values held in the payload bucket survive ``relayflow dev`` restarts, by Ctrl-C and by
``kill -9``: a run whose input, step output and event payload are each over the inline cap
is read, listed and completed across both.

Each stack is a subprocess on free ports sharing one state folder; waits are bounded polls.
"""

from __future__ import annotations

import hashlib
import json
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import requests
from dev_process import DevProcess, start_dev

TOKEN = "payload-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
#: Each value is well over the 200 KB inline cap of any deployment.
SIZE = 250_000
FLOWS = f"""
import hashlib
import json

from relayflow import workflow


def digest(value):
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()


def grow(data):
    return {{"blob": "s" * {SIZE}, "of": len(data["blob"])}}


@workflow(id="big.restart")
async def big(data, ctx):
    grown = await ctx.step("grow", grow, data)
    event = await ctx.wait_for_event("big.event")
    await ctx.wait_for_signal("finish")
    return {{"input": digest(data), "step": digest(grown), "event": digest(event)}}
"""


def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()


def _get(dev: DevProcess, path: str) -> Any:
    answer = requests.get(f"{dev.url}{path}", headers=AUTH, timeout=30)
    assert answer.status_code == 200, answer.text
    return answer.json()


def _post(dev: DevProcess, path: str, body: Any) -> Any:
    answer = requests.post(f"{dev.url}{path}", json=body, headers=AUTH, timeout=30)
    assert answer.status_code in (200, 201), answer.text
    return answer.json()


def _poll(dev: DevProcess, run_id: str, done: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
    deadline = time.monotonic() + 30
    run: dict[str, Any] = _get(dev, f"/api/runs/{run_id}")
    while not done(run):
        where = f"{run['status']} {_pending(run)}"
        assert time.monotonic() < deadline, f"run {run_id} did not get there: {where}"
        time.sleep(0.1)
        run = _get(dev, f"/api/runs/{run_id}")
    return run


def _pending(run: dict[str, Any]) -> list[str]:
    return [w["id"] for w in run.get("pendingWaitpoints", [])]


def _read_and_list(dev: DevProcess, run_id: str, data: Any) -> dict[str, Any]:
    run = _get(dev, f"/api/runs/{run_id}")
    assert run["input"] == data
    assert run["valuesUnavailable"] == []
    listed = _get(dev, "/api/runs?limit=10")
    assert [(r["id"], r["valuesUnavailable"]) for r in listed["runs"]] == [(run_id, [])]
    timeline = _get(dev, f"/api/runs/{run_id}/timeline?values=true")
    grow = [e for e in timeline["entries"] if e["id"] == "grow"]
    assert grow and grow[-1]["outcome"] == "ok", [e["id"] for e in timeline["entries"]]
    # Over the per-entry cap of the timeline: sized from its pointer, not fetched.
    assert grow[-1]["valueTruncated"] is True and grow[-1]["valueSize"] > SIZE
    return run


def _saved_after(state: Path, instant: float) -> None:
    """Wait until the stack's periodic snapshot is newer than ``instant`` (wall clock)."""
    snapshot = state / "moto.pickle"
    deadline = time.monotonic() + 15
    while not (snapshot.is_file() and snapshot.stat().st_mtime > instant):
        assert time.monotonic() < deadline, "no snapshot was taken"
        time.sleep(0.1)


def test_large_values_survive_ctrl_c_and_kill_9(tmp_path: Path) -> None:
    (tmp_path / "big_flows.py").write_text(textwrap.dedent(FLOWS))
    state = tmp_path / "state"
    data = {"blob": "i" * SIZE}
    event = {"blob": "e" * SIZE}

    def start(*extra: str) -> DevProcess:
        return start_dev(*extra, app="big_flows", cwd=tmp_path, state_dir=state)

    first = start("--token", TOKEN, "--fresh")
    try:
        run_id = _post(first, "/api/runs", {"workflowId": "big.restart", "input": data})["id"]
        _poll(first, run_id, lambda r: _pending(r) == ["event:big.event:0"])
        _read_and_list(first, run_id, data)
    finally:
        assert first.interrupt() == 0, "\n".join(first.errors)
        first.kill()

    second = start()
    try:
        _read_and_list(second, run_id, data)
        _post(second, f"/api/runs/{run_id}/events", {"eventType": "big.event", "payload": event})
        _poll(second, run_id, lambda r: _pending(r) == ["signal:finish:1"])
        parked = time.time()
        _saved_after(state, parked)
    finally:
        second.kill()  # SIGKILL: only what the periodic snapshot holds is kept

    third = start()
    try:
        run = _read_and_list(third, run_id, data)
        assert _pending(run) == ["signal:finish:1"]
        _post(third, f"/api/runs/{run_id}/signals", {"name": "finish"})
        done = _poll(third, run_id, lambda r: r["status"] == "completed")
        grown = {"blob": "s" * SIZE, "of": SIZE}
        assert done["output"] == {
            "input": _digest(data),
            "step": _digest(grown),
            "event": _digest(event),
        }
        assert _get(third, "/api/runs?limit=10")["runs"][0]["status"] == "completed"
    finally:
        assert third.interrupt() == 0, "\n".join(third.errors)
        third.kill()
