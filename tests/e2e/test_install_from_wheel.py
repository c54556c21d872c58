"""Each user extra, installed from the built wheel into a fresh virtualenv outside the checkout,
gives what it promises: ``[testing]`` a ``WorkflowTestEnv`` test under pytest, ``[local]``
``relayflow dev --app`` on the user's module (a run triggered over HTTP completes), ``[cdk]``
the construct."""

from __future__ import annotations

import signal
import subprocess
import textwrap
import threading
import time
from pathlib import Path

import pytest
import requests
from dev_process import free_port
from wheel_install import build_wheel, install, user_env, wheelhouse

pytestmark = pytest.mark.slow

FLOWS = """
from relayflow import workflow


def double(n):
    return n * 2


@workflow(id="mine.double")
def run_double(data, ctx):
    return {"doubled": ctx.step("double", double, data["n"])}
"""

FLOWS_TEST = """
from relayflow.testing import WorkflowTestEnv

from flows import run_double


def test_double():
    env = WorkflowTestEnv([run_double])
    run = env.trigger("mine.double", {"n": 21})
    assert env.get_run(run.id).output == {"doubled": 42}
"""


@pytest.fixture(scope="module")
def wheel_and_wheelhouse(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    wheel = build_wheel(tmp_path_factory.mktemp("dist"))
    return wheel, wheelhouse(wheel)


def _project(root: Path) -> Path:
    project = root / "myproject"
    project.mkdir()
    (project / "flows.py").write_text(textwrap.dedent(FLOWS))
    (project / "test_flows.py").write_text(textwrap.dedent(FLOWS_TEST))
    return project


def _run(command: list[str], cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        command, cwd=cwd, env=user_env(), capture_output=True, text=True, timeout=timeout
    )


def _installed(
    tmp_path: Path, extra: str, wheel_and_wheelhouse: tuple[Path, Path]
) -> tuple[Path, Path]:
    wheel, wheels = wheel_and_wheelhouse
    bin_dir = install(wheel, extra, tmp_path / f"venv-{extra}", wheels)
    project = _project(tmp_path)
    where = _run(
        [str(bin_dir / "python"), "-c", "import relayflow; print(relayflow.__file__)"], project
    )
    assert where.returncode == 0, where.stderr
    assert where.stdout.startswith(str(tmp_path / f"venv-{extra}")), where.stdout
    help_text = _run([str(bin_dir / "relayflow"), "--help"], project)
    assert help_text.returncode == 0, help_text.stderr
    assert "init" in help_text.stdout and "dev" in help_text.stdout
    return bin_dir, project


def _pytest_passes(bin_dir: Path, project: Path) -> None:
    result = _run(
        [str(bin_dir / "python"), "-m", "pytest", "-q", "-p", "no:cacheprovider"], project
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 passed" in result.stdout


def test_testing_extra_runs_a_workflow_test_with_pytest(
    tmp_path: Path, wheel_and_wheelhouse: tuple[Path, Path]
) -> None:
    bin_dir, project = _installed(tmp_path, "testing", wheel_and_wheelhouse)
    _pytest_passes(bin_dir, project)
    dev = _run([str(bin_dir / "relayflow"), "dev", "--app", "flows"], project)
    assert dev.returncode == 2 and dev.stdout == ""
    assert dev.stderr.endswith("missing): pip install 'relayflow[local]'\n"), dev.stderr


def test_local_extra_hosts_the_users_module_and_completes_a_run(
    tmp_path: Path, wheel_and_wheelhouse: tuple[Path, Path]
) -> None:
    bin_dir, project = _installed(tmp_path, "local", wheel_and_wheelhouse)
    _pytest_passes(bin_dir, project)
    port, moto_port = free_port(), free_port()
    process = subprocess.Popen(
        [
            str(bin_dir / "relayflow"), "dev", "--app", "flows", "--token", "t",
            "--port", str(port), "--moto-port", str(moto_port),
        ],
        cwd=project, env=user_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    lines: list[str] = []
    errors: list[str] = []
    threading.Thread(target=lambda: lines.extend(process.stdout or []), daemon=True).start()
    threading.Thread(target=lambda: errors.extend(process.stderr or []), daemon=True).start()
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while not any("Ctrl-C stops" in line for line in lines):
            assert process.poll() is None, "".join(lines + errors)
            assert time.monotonic() < deadline, "".join(lines)
            time.sleep(0.2)
        assert any("app          flows: 1 workflow(s)" in line for line in lines), lines
        answer = requests.post(
            f"{url}/api/runs",
            json={"workflowId": "mine.double", "input": {"n": 21}, "waitMs": 10000},
            headers={"Authorization": "Bearer t"},
            timeout=30,
        )
        assert answer.status_code == 201, answer.text
        assert answer.json()["status"] == "completed"
        assert answer.json()["output"] == {"doubled": 42}
    finally:
        process.send_signal(signal.SIGINT)
        try:
            status = process.wait(timeout=40)
        finally:
            if process.poll() is None:
                process.kill()
    assert status == 0


def test_cdk_extra_brings_the_construct(
    tmp_path: Path, wheel_and_wheelhouse: tuple[Path, Path]
) -> None:
    bin_dir, project = _installed(tmp_path, "cdk", wheel_and_wheelhouse)
    # Building the construct tree is enough: synthesis itself is tested with the scaffold.
    probe = (
        "from pathlib import Path\n"
        "from aws_cdk import App, Stack\n"
        "from relayflow.cdk import (InlineStepHost, LambdaBundle, RelayflowOrchestrator,\n"
        "    RelayflowOrchestratorProps)\n"
        "app = App(context={'aws:cdk:bundling-stacks': []})\n"
        "props = RelayflowOrchestratorProps(step_hosts=(InlineStepHost(module='flows'),),\n"
        "    bundle=LambdaBundle(workflow_paths=(Path('flows.py'),)))\n"
        "relayflow = RelayflowOrchestrator(Stack(app, 'S'), 'R', props)\n"
        "print(len(relayflow.node.find_all()))\n"
    )
    result = _run([str(bin_dir / "python"), "-c", probe], project)
    assert result.returncode == 0, result.stderr
    assert int(result.stdout.strip().splitlines()[-1]) > 50
