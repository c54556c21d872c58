"""``relayflow workflows pause|resume|paused`` against a scripted API: the request each
sends and what each prints."""

from __future__ import annotations

import io

from cli_fake_api import FakeApi

from relayflow.cli import main

JOB = {"jobId": "idem-relayflow.bulk-action-workflow-pause-x", "action": "pause"}
CHANGE = {
    "workflowId": "billing.charge",
    "environment": "production",
    "pausedAt": 1_796_471_000_000,
    "by": "ops-token",
    "reason": "bad deploy",
    "job": JOB,
}


def cli(api: FakeApi, *argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(["--url", api.url, *argv], stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def test_pause_sends_the_environment_and_reason_and_names_the_job(fake_api: FakeApi) -> None:
    fake_api.on("POST", "/api/workflows/billing.charge/pause", (200, CHANGE))
    code, out, _ = cli(
        fake_api, "workflows", "pause", "billing.charge", "--env", "production", "--reason", "bad"
    )
    assert code == 0
    sent = fake_api.last("POST", "/api/workflows/billing.charge/pause").body
    assert sent == {"environment": "production", "reason": "bad"}
    assert "workflow billing.charge paused in production" in out
    assert f"relayflow runs bulk-status {JOB['jobId']} --follow" in out


def test_resume_sends_its_rate(fake_api: FakeApi) -> None:
    resumed = {**CHANGE, "job": {**JOB, "action": "resume"}}
    fake_api.on("POST", "/api/workflows/billing.charge/resume", (200, resumed))
    code, out, _ = cli(
        fake_api, "workflows", "resume", "billing.charge", "--env", "production", "--rate", "5"
    )
    assert code == 0
    sent = fake_api.last("POST", "/api/workflows/billing.charge/resume").body
    assert sent == {"environment": "production", "reason": None, "ratePerSecond": 5.0}
    assert "resumed in production" in out


def test_paused_lists_the_marks(fake_api: FakeApi) -> None:
    listed = {"workflows": [{k: v for k, v in CHANGE.items() if k != "job"}]}
    fake_api.on("GET", "/api/paused-workflows", (200, listed))
    code, out, _ = cli(fake_api, "workflows", "paused", "--env", "production")
    assert code == 0
    assert fake_api.last("GET", "/api/paused-workflows").query == {"environment": ["production"]}
    assert out.splitlines()[1].split()[:2] == ["billing.charge", "production"]
    fake_api.on("GET", "/api/paused-workflows", (200, {"workflows": []}))
    assert "no workflow is paused" in cli(fake_api, "workflows", "paused")[1]
