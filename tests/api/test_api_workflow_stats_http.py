"""Workflow statistics as deployed: runs driven through the API on the AWS driver (atomic
moto), each end added once to its workflow's hourly rollup in the runs table, read back over
HTTP and with ``relayflow workflows stats``."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
from aws_http import TOKEN, HttpApi, serve_api

from relayflow.cli import main

pytestmark = pytest.mark.usefixtures("clean_registry")


def _register() -> None:
    from relayflow import workflow
    from relayflow.errors import FatalError

    @workflow(id="stats.charge")
    def charge(data: Any, ctx: Any) -> Any:
        amount = ctx.step("price", lambda: data["amount"])
        if amount < 0:
            raise FatalError("negative amount", code="NEGATIVE")
        return {"charged": amount}


def cli(api: HttpApi, *argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(["--url", api.url, "--token", TOKEN, *argv], stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def test_runs_driven_on_aws_are_counted_once_and_shown_by_the_api_and_the_cli() -> None:
    _register()
    with serve_api() as api:
        outcomes = []
        for amount in (5, 7, -1, 9):
            run = api.post(
                "/api/runs",
                {
                    "workflowId": "stats.charge",
                    "environment": "preview",
                    "input": {"amount": amount},
                },
            ).json()
            outcomes.append(run["status"])
        assert outcomes == ["completed", "completed", "failed", "completed"]
        rollups = api.driver.statistics.hours(
            "preview", "stats.charge", 0, api.driver.engine.clock.now_ms()
        )
        assert sum(r.runs for r in rollups) == 4

        answer = api.get("/api/workflows/stats.charge/stats?environment=preview&from=1h")
        assert answer.status_code == 200, answer.text
        body = answer.json()
        assert (body["runs"], body["successRate"]) == (4, 0.75)
        assert (body["byStatus"]["completed"], body["byStatus"]["failed"]) == (3, 1)
        assert body["durationMs"]["p50"] is not None
        assert body["durationMs"]["p95"] >= body["durationMs"]["p50"]

        code, out, err = cli(
            api, "workflows", "stats", "stats.charge", "--env", "preview", "--hourly"
        )
        assert code == 0, err
        lines = out.splitlines()
        assert lines[0].startswith("workflow stats.charge in preview, runs ended ")
        assert lines[1].split() == ["runs", "4", "(completed", "3,", "failed", "1)"]
        assert lines[2].split() == ["success", "rate", "75.0%"]
        assert lines[5].split() == [
            "waiting",
            "now",
            "queued",
            "0,",
            "delayed",
            "0,",
            "paused",
            "0",
        ]
        assert "HOUR (UTC)" in out and out.rstrip().splitlines()[-1].split()[2] == "4"

        code, out, _ = cli(api, "--json", "workflows", "stats", "stats.charge", "--env", "preview")
        assert code == 0 and json.loads(out)["runs"] == 4

        code, _, err = cli(api, "workflows", "stats", "stats.charge", "--since", "90d")
        assert code != 0 and "invalid_range" in err
        code, out, _ = cli(
            api,
            "--json",
            "workflows",
            "stats",
            "stats.charge",
            "--env",
            "preview",
            "--until",
            "2h",
        )
        before = json.loads(out)
        assert code == 0 and before["runs"] == 0, "the runs ended after --until"
        assert before["until"] - before["since"] == 24 * 3_600_000
