"""``relayflow runs pause|resume|redrive|rerun`` against a scripted API: the request each
sends and the run it prints."""

from __future__ import annotations

import io
import json
from pathlib import Path

from cli_fake_api import FakeApi

from relayflow.cli import main

PAUSED = {
    "id": "run_1",
    "workflowId": "orders.fulfil",
    "status": "paused",
    "startedAt": 1_700_000_000_000,
    "tags": [],
    "pause": {"at": 1_700_000_060_000, "by": "ops", "reason": "bank down", "resumeTo": "waiting"},
    "redriveCount": 0,
}
TIMELINE = {
    "entries": [
        {
            "type": "step",
            "id": "charge",
            "attempt": 1,
            "startedAt": 1_700_000_000_010,
            "endedAt": 1_700_000_000_050,
            "outcome": "err",
            "error": {"code": "UNKNOWN", "message": "gateway timeout"},
            "redrive": 1,
            "topLevel": True,
        },
        {
            "type": "action",
            "id": "k-1",
            "kind": "pause",
            "startedAt": 1_700_000_060_000,
            "endedAt": 1_700_000_060_000,
            "outcome": "applied",
            "by": "ops",
            "reason": "bank down",
        },
    ]
}
RERUN = {
    "id": "run_2",
    "workflowId": "orders.fulfil",
    "status": "waiting",
    "startedAt": 1_700_000_100_000,
    "tags": [],
    "rerunOf": {"runId": "run_1", "fromStep": "ship"},
}


def cli(api: FakeApi, *argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(["--url", api.url, *argv], stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def test_pause_sends_the_reason_and_prints_the_run_as_get_does(fake_api: FakeApi) -> None:
    fake_api.on("POST", "/api/runs/run_1/pause", (200, PAUSED))
    fake_api.on("GET", "/api/runs/run_1/timeline", (200, TIMELINE))

    code, out, _ = cli(fake_api, "runs", "pause", "run_1", "--reason", "bank down")

    assert code == 0
    sent = fake_api.last("POST", "/api/runs/run_1/pause")
    assert sent.body == {"reason": "bank down"}
    assert sent.headers["idempotency-key"].startswith("cli-")
    assert "status    paused" in out
    assert "paused    since 2023-11-14 22:14:20" in out and "by ops: bank down" in out
    assert "action pause" in out
    assert "(before redrive 1)" in out


def test_resume_sends_an_empty_body_without_a_reason(fake_api: FakeApi) -> None:
    fake_api.on("POST", "/api/runs/run_1/resume", (200, {**PAUSED, "status": "waiting"}))
    fake_api.on("GET", "/api/runs/run_1/timeline", (200, {"entries": []}))

    code, _, _ = cli(fake_api, "runs", "resume", "run_1")

    assert code == 0
    assert fake_api.last("POST", "/api/runs/run_1/resume").body == {}


def test_redrive_sends_the_retry_override(fake_api: FakeApi) -> None:
    fake_api.on("POST", "/api/runs/run_1/redrive", (200, {**PAUSED, "status": "running"}))
    fake_api.on("GET", "/api/runs/run_1/timeline", (200, {"entries": []}))

    code, _, _ = cli(
        fake_api, "runs", "redrive", "run_1", "--retry-max", "5", "--retry-initial", "2s"
    )
    cli(fake_api, "runs", "redrive", "run_1", "--retry-initial", "1500")

    assert code == 0
    first, second = [r for r in fake_api.requests if r.path == "/api/runs/run_1/redrive"]
    assert first.body == {"retry": {"max": 5, "initial": "2s"}}
    assert second.body == {"retry": {"initial": 1500}}


def test_rerun_sends_the_step_and_input_and_prints_the_new_run(
    fake_api: FakeApi, tmp_path: Path
) -> None:
    fake_api.on("POST", "/api/runs/run_1/rerun", (201, RERUN))
    fake_api.on("GET", "/api/runs/run_2/timeline", (200, {"entries": []}))
    (tmp_path / "input.json").write_text('{"id": "o-2"}')

    code, out, _ = cli(
        fake_api,
        "runs",
        "rerun",
        "run_1",
        "--from-step",
        "ship",
        "--input",
        f"@{tmp_path / 'input.json'}",
    )

    assert code == 0
    assert fake_api.last("POST", "/api/runs/run_1/rerun").body == {
        "fromStep": "ship",
        "input": {"id": "o-2"},
    }
    assert "run       run_2" in out
    assert "rerun of  run_1 from step ship" in out


def test_rerun_without_input_keeps_the_original_s_and_json_prints_run_and_timeline(
    fake_api: FakeApi,
) -> None:
    fake_api.on("POST", "/api/runs/run_1/rerun", (201, RERUN))
    fake_api.on("GET", "/api/runs/run_2/timeline", (200, TIMELINE))

    code, out, _ = cli(fake_api, "--json", "runs", "rerun", "run_1", "--from-step", "ship")

    assert code == 0
    assert fake_api.last("POST", "/api/runs/run_1/rerun").body == {"fromStep": "ship"}
    printed = json.loads(out)
    assert printed["run"] == RERUN and printed["timeline"] == TIMELINE["entries"]


def test_a_conflict_exits_1_with_its_code(fake_api: FakeApi) -> None:
    refusal = {"error": "already_paused", "message": "run run_1 is already paused"}
    fake_api.on("POST", "/api/runs/run_1/pause", (409, refusal))

    code, out, err = cli(fake_api, "runs", "pause", "run_1")

    assert (code, out) == (1, "")
    assert err.strip() == "error (409): already_paused: run run_1 is already paused"


def test_rerun_needs_a_step(fake_api: FakeApi) -> None:
    code, _, err = cli(fake_api, "runs", "rerun", "run_1")
    assert code == 2
    assert "--from-step" in err
    assert fake_api.requests == []
