"""``relayflow init``'s project works as its README says: its test passes under pytest, ``relayflow
dev`` hosts its workflow (triggered, its event delivered, it completes), and its CDK app
synthesises."""

from __future__ import annotations

import importlib.util
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import requests
from dev_process import console_script_command, start_dev, wait_until_completed

pytestmark = pytest.mark.slow

TOKEN = "init-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def _env() -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("RELAYFLOW_", "PYTEST")) and k not in ("PYTHONPATH", "CDK_OUTDIR")
    }
    env["JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION"] = "20"
    return env


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    parent = tmp_path_factory.mktemp("projects")
    result = subprocess.run(
        console_script_command("init", "shop-flows"),
        cwd=parent,
        env=_env(),
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "relayflow dev --app shop_flows.workflows --reload" in result.stdout
    return parent / "shop-flows"


def _in_project(project: Path, *command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *command],
        cwd=project,
        env=_env(),
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )


def test_the_scaffolds_tests_pass(project: Path) -> None:
    result = _in_project(project, "-m", "pytest", "-q", "-p", "no:cacheprovider")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "2 passed" in result.stdout


def test_relayflow_dev_runs_the_example_to_completion(project: Path, tmp_path: Path) -> None:
    dev = start_dev(
        "--token", TOKEN, "--reload", app="shop_flows.workflows", cwd=project,
        console_script=True, state_dir=tmp_path / "state",
    )  # fmt: skip
    try:
        assert dev.lines[0].endswith(f"reloading on changes to {project / 'shop_flows'}")
        assert any("shop_flows.workflows: 1 workflow(s)" in line for line in dev.lines)
        # The trigger the banner suggests (its curl command's body), as a reader would paste it.
        (suggested,) = [line for line in dev.lines if "curl -s -X POST" in line]
        body = json.loads(shlex.split(suggested)[-1])
        assert body["workflowId"] == "orders.process"
        answer = requests.post(f"{dev.url}/api/runs", json=body, headers=AUTH, timeout=30)
        assert answer.status_code == 201, answer.text
        run_id = answer.json()["id"]
        delivered = requests.post(
            f"{dev.url}/api/runs/{run_id}/events",
            json={"eventType": "payment.received", "payload": {"orderId": "o-1", "amount": 42}},
            headers=AUTH,
            timeout=30,
        )
        assert delivered.status_code == 200, delivered.text
        run = wait_until_completed(dev.url, run_id, AUTH)
        assert run["output"] == {"reserved": ["book"], "paid": 42}
    finally:
        try:
            assert dev.interrupt(timeout_s=40) == 0, "\n".join(dev.errors)
        finally:
            dev.kill()


@pytest.mark.skipif(
    importlib.util.find_spec("aws_cdk") is None, reason="the cdk extra is not installed"
)
def test_the_scaffolds_cdk_app_synthesises(project: Path) -> None:
    # What cdk.json's "app" runs: `npx aws-cdk@2 synth` adds nothing the test needs.
    app = json.loads((project / "cdk.json").read_text())["app"]
    assert app == "python app.py"
    result = _in_project(project, "app.py")
    assert result.returncode == 0, result.stderr
    template: dict[str, Any] = json.loads(
        (project / "cdk.out" / "ShopFlows.template.json").read_text()
    )
    functions = [
        r["Properties"]
        for r in template["Resources"].values()
        if r["Type"] == "AWS::Lambda::Function"
    ]
    assert {f["Environment"]["Variables"].get("RELAYFLOW_WORKFLOW_MODULES") for f in functions} >= {
        "shop_flows.workflows"
    }
    (key,) = {f["Code"]["S3Key"] for f in functions}
    asset = project / "cdk.out" / f"asset.{key.removesuffix('.zip')}"
    assert (asset / "shop_flows" / "workflows.py").read_text() == (
        project / "shop_flows" / "workflows.py"
    ).read_text()
    assert (asset / "relayflow" / "worker" / "hosts.py").is_file()
