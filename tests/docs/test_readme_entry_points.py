"""The README names the handler of every function the CDK construct deploys."""

from __future__ import annotations

import importlib
from pathlib import Path

from relayflow.cdk.functions import FUNCTION_SPECS

README = Path(__file__).resolve().parents[2] / "README.md"


def test_the_readme_names_each_deployed_handler_and_each_exists() -> None:
    readme = README.read_text(encoding="utf-8")
    for spec in FUNCTION_SPECS:
        assert f"`{spec.handler}` ({spec.name})" in readme
        module, _, name = spec.handler.rpartition(".")
        assert callable(getattr(importlib.import_module(module), name))
