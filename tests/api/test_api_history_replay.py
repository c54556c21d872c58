"""A deploy checked against recorded runs, end to end: runs driven through the API on the AWS
driver (atomic moto), their histories exported with ``relayflow runs export`` over HTTP, then
``relayflow replay`` run against the app's unchanged and changed code."""

from __future__ import annotations

import io
import json
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aws_http import TOKEN, HttpApi, serve_api

from relayflow.cli import main
from relayflow.run_history import parse_history, read_history

pytestmark = pytest.mark.usefixtures("clean_registry")

WORKFLOW = "history.order"
#: Over the inline cap: the step's output is held in the payload bucket by reference.
BLOB = "b" * 50_000
APP = """
from relayflow import workflow

@workflow(id="history.order", versioning="upgrade")
def order(data, ctx):
    blob = ctx.step("{first}", lambda: "b" * 50_000)
    ctx.sleep("1h")
    return {{"size": len(blob), "shipped": ctx.step("ship", lambda: True)}}
"""


def _register() -> None:
    from relayflow import workflow

    @workflow(id=WORKFLOW, versioning="upgrade")
    def order(data: Any, ctx: Any) -> Any:
        blob = ctx.step("reserve", lambda: BLOB)
        ctx.sleep("1h")
        return {"size": len(blob), "shipped": ctx.step("ship", lambda: True)}


def cli(api: HttpApi | None, *argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    connection = ["--url", api.url, "--token", TOKEN] if api is not None else []
    code = main([*connection, *argv], stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture
def apps(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Two app modules in the working directory: the recorded code and a renamed step."""
    (tmp_path / "history_app_same.py").write_text(textwrap.dedent(APP.format(first="reserve")))
    (tmp_path / "history_app_renamed.py").write_text(textwrap.dedent(APP.format(first="hold")))
    monkeypatch.chdir(tmp_path)
    yield tmp_path
    for name in ("history_app_same", "history_app_renamed"):
        sys.modules.pop(name, None)


def test_exported_histories_replay_on_the_same_code_and_fail_on_a_renamed_step(
    apps: Path,
) -> None:
    _register()
    with serve_api() as api:
        first = api.post("/api/runs", {"workflowId": WORKFLOW, "input": {"order": 1}}).json()
        second = api.post("/api/runs", {"workflowId": WORKFLOW, "input": {"order": 2}}).json()
        assert first["status"] == second["status"] == "waiting", first

        served = api.get(f"/api/runs/{first['id']}/history")
        code, out, err = cli(api, "runs", "export", first["id"], "-o", "one")
        listed = cli(api, "runs", "export", "--workflow", WORKFLOW, "--limit", "5", "-o", "all")
        missing = cli(api, "runs", "export", "run_missing", "-o", "none")

    assert served.status_code == 200, served.text
    body = served.json()
    assert body["format"] == "relayflow.history/1"
    assert (body["runId"], body["workflowId"], body["status"]) == (
        first["id"],
        WORKFLOW,
        "waiting",
    )
    assert body["input"] == {"order": 1}
    assert body["journal"]["stepResults"]["reserve"]["output"] == BLOB, "values resolved"
    assert code == 0, err
    (exported,) = (apps / "one").iterdir()
    assert out == f"{first['id']} (waiting) -> one/{exported.name}\n"
    assert read_history(exported) == parse_history(body), "the file holds what the API answered"
    assert listed[0] == 0 and len(list((apps / "all").iterdir())) == 2
    assert missing[0] == 1 and "404" in missing[2]

    same = cli(None, "replay", "all", "--app", "history_app_same")
    renamed = cli(None, "replay", str(exported), "--app", "history_app_renamed")

    assert same[0] == 0, same
    assert "2 of 2 recorded run(s) replay on this code" in same[1]
    assert renamed[0] == 1, renamed
    assert "FAIL" in renamed[1]
    assert (
        "operation #0 of the workflow body: history has step 'reserve', code reaches step "
        "'hold'" in renamed[1]
    )


def test_the_history_route_is_documented_and_answers_404_for_an_unknown_run() -> None:
    with serve_api() as api:
        unknown = api.get("/api/runs/run_missing/history")
        doc = api.get("/api/openapi.json").json()

    assert unknown.status_code == 404
    assert unknown.json()["error"] == "not_found"
    operation = doc["paths"]["/api/runs/{run_id}/history"]["get"]
    assert operation["operationId"] == "getRunHistory"
    assert operation["security"] == [{"bearerAuth": ["runs:read"]}]


def test_replay_refuses_a_bad_file_and_an_unknown_workflow(apps: Path) -> None:
    (apps / "broken.json").write_text("{")
    history = {
        "format": "relayflow.history/1",
        "runId": "run_1",
        "workflowId": "not.registered",
        "status": "waiting",
        "journal": {},
    }
    (apps / "unknown.json").write_text(json.dumps(history))

    broken = cli(None, "replay", "broken.json", "--app", "history_app_same")
    unknown = cli(None, "replay", "unknown.json", "--app", "history_app_same")
    no_app = cli(None, "replay", "unknown.json", "--app", "history_app_absent")

    assert broken[0] == 2 and "broken.json: not JSON" in broken[2]
    assert unknown[0] == 2
    assert "no workflow is registered under 'not.registered'" in unknown[2]
    assert no_app[0] == 2 and "cannot import app module 'history_app_absent'" in no_app[2]
