"""``relayflow manifest build`` writes the body ``POST /api/manifests`` takes, as it is."""

from __future__ import annotations

import io
import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from api_harness import make_api

from relayflow.cli import main
from relayflow.events import filters as filter_registry
from relayflow.sdk import registry as workflow_registry
from relayflow.testing import WorkflowTestEnv

APP = """
from relayflow import trigger_on, workflow


@workflow(id="build_app.greet")
async def greet(name, ctx):
    return f"hello {name}"


trigger_on("user.joined", target=greet, input={"path": "data.name"})
"""


@pytest.fixture
def app_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    (tmp_path / "build_app.py").write_text(APP)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("sys.path", list(sys.path))
    # The manifest lists every registered workflow: only the app's, as in a fresh process.
    workflows, filters = dict(workflow_registry._REGISTRY), dict(filter_registry._registry)
    workflow_registry._REGISTRY.clear()
    filter_registry._registry.clear()
    sys.modules.pop("build_app", None)
    try:
        yield tmp_path
    finally:
        sys.modules.pop("build_app", None)
        workflow_registry._REGISTRY.clear()
        workflow_registry._REGISTRY.update(workflows)
        filter_registry._registry.clear()
        filter_registry._registry.update(filters)


def test_the_built_file_registers_with_post_api_manifests(app_dir: Path) -> None:
    out, err = io.StringIO(), io.StringIO()
    code = main(["manifest", "build", "--app", "build_app", "--env", "preview"], stdout=out,
                stderr=err)  # fmt: skip
    assert code == 0, err.getvalue()
    written = (app_dir / "manifest.json").read_text()
    body = json.loads(written)
    assert body["environment"] == "preview"
    assert [w["id"] for w in body["manifest"]["workflows"]] == ["build_app.greet"]
    assert err.getvalue().startswith(
        f"wrote manifest.json: manifest {body['manifest']['versionId']}"
    )

    api = make_api(WorkflowTestEnv())
    answer = api.call("POST", "/api/manifests", raw_body=written)  # curl -d @manifest.json
    assert answer.status == 200, answer.body
    assert answer.body["versionId"] == body["manifest"]["versionId"]
    shown = api.get("/api/manifests/preview").body
    assert shown["manifest"]["eventFilters"][0]["targetWorkflowId"] == "build_app.greet"


def test_build_to_stdout_and_a_broken_app(app_dir: Path) -> None:
    out = io.StringIO()
    assert main(["manifest", "build", "--app", "build_app", "-o", "-"], stdout=out) == 0
    assert json.loads(out.getvalue())["environment"] == "development"
    err = io.StringIO()
    code = main(["manifest", "build", "--app", "no_such_app_module"], stderr=err)
    assert code == 2
    assert "cannot import app module 'no_such_app_module'" in err.getvalue()
