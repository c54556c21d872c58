"""An application of one's own: `relayflow.cdk` used from a folder outside this checkout.

The app bundles its own workflow package into the functions. Its dependency folder (relayflow
and what pip installs for Lambda) is seeded in the cache beforehand, so the test needs no
network while the bundling itself (copying the workflow package into the asset) runs for real.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from aws_cdk import App, Stack
from aws_cdk.assertions import Template
from infra_asserts import functions_by_handler

from relayflow.cdk import (
    BundleError,
    InlineStepHost,
    LambdaBundle,
    RelayflowOrchestrator,
    RelayflowOrchestratorProps,
    WorkerStepHost,
)

WORKFLOWS = """
from relayflow import WorkflowContext, workflow


@workflow(id="shop.order")
async def order(ctx: WorkflowContext, payload: dict) -> dict:
    return {"ok": True}
"""

APP = """
from pathlib import Path

from aws_cdk import App, Stack

from relayflow.cdk import (
    LambdaBundle,
    RelayflowOrchestrator,
    RelayflowOrchestratorProps,
    WorkerStepHost,
)

here = Path.cwd()
app = App(outdir=str(here / "cdk.out"))
stack = Stack(app, "Shop")
RelayflowOrchestrator(
    stack,
    "Relayflow",
    RelayflowOrchestratorProps(
        environment_name="shop",
        step_hosts=(WorkerStepHost(module="shop.workflows"),),
        bundle=LambdaBundle(
            workflow_paths=(here / "shop",),
            project_root=None,
            cache_dir=here / "bundles",
        ),
    ),
)
app.synth()
"""


def _write_app(root: Path) -> LambdaBundle:
    (root / "shop").mkdir()
    (root / "shop" / "__init__.py").write_text("")
    (root / "shop" / "workflows.py").write_text(textwrap.dedent(WORKFLOWS))
    (root / "app.py").write_text(textwrap.dedent(APP))
    return LambdaBundle(
        workflow_paths=(root / "shop",), project_root=None, cache_dir=root / "bundles"
    )


def _seed_dependencies(bundle: LambdaBundle) -> Path:
    seeded = bundle.cache_dir / bundle.dependencies_key()
    (seeded / "relayflow").mkdir(parents=True)
    (seeded / "relayflow" / "SEEDED").write_text("built earlier by pip\n")
    return seeded


@pytest.mark.slow
def test_an_app_outside_the_checkout_bundles_its_own_workflows(tmp_path: Path) -> None:
    bundle = _write_app(tmp_path)
    _seed_dependencies(bundle)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "CDK_OUTDIR")}
    env["JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION"] = "20"
    # -I: neither this checkout nor the app folder is on sys.path; only installed packages.
    result = subprocess.run(
        [sys.executable, "-I", "app.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr

    template: dict[str, Any] = json.loads((tmp_path / "cdk.out" / "Shop.template.json").read_text())
    functions = {
        r["Properties"]["Handler"]: r["Properties"]
        for r in template["Resources"].values()
        if r["Type"] == "AWS::Lambda::Function"
    }
    worker = functions["relayflow.entrypoints.worker.lambda_handler"]
    assert worker["Environment"]["Variables"]["RELAYFLOW_WORKFLOW_MODULES"] == "shop.workflows"
    (key,) = {f["Code"]["S3Key"] for f in functions.values()}
    asset = tmp_path / "cdk.out" / f"asset.{key.removesuffix('.zip')}"
    assert (asset / "shop" / "workflows.py").read_text() == textwrap.dedent(WORKFLOWS)
    assert (asset / "relayflow" / "SEEDED").is_file(), "the cached dependencies are reused"


def test_changing_the_workflows_changes_the_asset_hash(tmp_path: Path) -> None:
    bundle = _write_app(tmp_path)
    before = bundle.fingerprint()
    (tmp_path / "shop" / "workflows.py").write_text(WORKFLOWS + "\n# changed\n")
    assert bundle.fingerprint() != before


@pytest.mark.parametrize(
    "host", [InlineStepHost(module="billing.flows"), WorkerStepHost(module="billing")]
)
def test_a_step_host_module_missing_from_the_bundle_is_refused(
    tmp_path: Path, host: InlineStepHost | WorkerStepHost
) -> None:
    bundle = _write_app(tmp_path)
    app = App(context={"aws:cdk:bundling-stacks": []}, outdir=str(tmp_path / "out"))
    props = RelayflowOrchestratorProps(step_hosts=(host,), bundle=bundle)
    with pytest.raises(BundleError, match=r"'billing.*' is not in the Lambda bundle"):
        RelayflowOrchestrator(Stack(app, "S"), "Relayflow", props)


def test_a_module_a_requirement_provides_is_left_to_pip(tmp_path: Path) -> None:
    app = App(context={"aws:cdk:bundling-stacks": []}, outdir=str(tmp_path / "out"))
    stack = Stack(app, "S")
    RelayflowOrchestrator(
        stack,
        "Relayflow",
        RelayflowOrchestratorProps(
            step_hosts=(InlineStepHost(module="billing.flows"),),
            bundle=LambdaBundle(requirements=("billing-flows==1.0",), cache_dir=tmp_path / "c"),
        ),
    )
    api = functions_by_handler(Template.from_stack(stack))["api"]
    assert api["Environment"]["Variables"]["RELAYFLOW_WORKFLOW_MODULES"] == "billing.flows"


def test_importing_relayflow_imports_nothing_from_cdk() -> None:
    probe = (
        "import sys, relayflow, relayflow.cli\n"
        "import relayflow.entrypoints.api, relayflow.entrypoints.drive\n"
        "import relayflow.entrypoints.sweeper, relayflow.entrypoints.worker\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'aws_cdk', 'constructs', 'jsii'}))"
    )
    result = subprocess.run(
        [sys.executable, "-I", "-c", probe], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "[]"
