"""One entry point per deployed function: the sample stack's handlers, the `functions/` modules
and the package's entry points are the same callables."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

import pytest
from aws_cdk import App, Stack
from aws_cdk.assertions import Template
from infra_asserts import ROOT, functions_by_handler, resources

from infra.stack import FUNCTIONS, HANDLERS
from relayflow.cdk import BundleError, FunctionHandlers, LambdaBundle, RelayflowOrchestrator
from relayflow.cdk import RelayflowOrchestratorProps as Props
from relayflow.cdk.functions import FUNCTION_SPECS, FunctionSpec

pytestmark = pytest.mark.slow


def _resolve(handler: str) -> Callable[..., Any]:
    module_name, _, attribute = handler.rpartition(".")
    found: Callable[..., Any] = getattr(importlib.import_module(module_name), attribute)
    return found


@pytest.mark.parametrize("spec", FUNCTION_SPECS, ids=lambda spec: spec.name)
def test_the_sample_stack_deploys_the_functions_folder_modules(
    spec: FunctionSpec, sample_template: Template
) -> None:
    deployed = functions_by_handler(sample_template)[spec.name]["Handler"]
    assert deployed == f"functions.{spec.name}.handler.lambda_handler"
    assert (FUNCTIONS / spec.name / "handler.py").is_file()
    assert _resolve(deployed) is _resolve(spec.handler)
    assert spec.handler == f"relayflow.entrypoints.{spec.name}.lambda_handler"


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("lambda_handler", "relayflow.entrypoints.api.lambda_handler"),
        ("drive_handler", "relayflow.entrypoints.drive.lambda_handler"),
        ("sweeper_handler", "relayflow.entrypoints.sweeper.lambda_handler"),
    ],
)
def test_the_old_entry_point_names_still_resolve_with_a_warning(old: str, new: str) -> None:
    module = importlib.import_module("relayflow.api.handler")
    with pytest.warns(DeprecationWarning, match=new.rpartition(".")[0]):
        found = getattr(module, old)
    assert found is _resolve(new)


def test_a_construct_without_handlers_uses_the_package_entry_points(
    variant_template: Template,
) -> None:
    handlers = {
        r["Properties"]["Handler"]
        for r in resources(variant_template, "AWS::Lambda::Function").values()
    }
    assert {spec.handler for spec in FUNCTION_SPECS} <= handlers


def test_a_handler_module_missing_from_the_bundle_is_refused(tmp_path: Any) -> None:
    app = App(context={"aws:cdk:bundling-stacks": []}, outdir=str(tmp_path))
    props = Props(
        handlers=FunctionHandlers(api="handlers.api.lambda_handler"),
        bundle=LambdaBundle(workflow_paths=(ROOT / "examples",)),
    )
    with pytest.raises(BundleError, match=r"handler module 'handlers\.api'"):
        RelayflowOrchestrator(Stack(app, "S"), "Relayflow", props)


def test_the_sample_handlers_name_every_function() -> None:
    assert set(HANDLERS.custom_modules()) == {
        f"functions.{spec.name}.handler" for spec in FUNCTION_SPECS
    }
