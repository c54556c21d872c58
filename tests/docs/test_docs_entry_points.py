"""The Development page names the handler of every function the CDK construct deploys."""

from __future__ import annotations

import importlib
from pathlib import Path

from relayflow.cdk.functions import FUNCTION_SPECS

PAGE = Path(__file__).resolve().parents[2] / "docs" / "development.md"


def test_the_development_page_names_each_deployed_handler_and_each_exists() -> None:
    page = PAGE.read_text(encoding="utf-8")
    for spec in FUNCTION_SPECS:
        assert f"`{spec.handler}` ({spec.name})" in page
        module, _, name = spec.handler.rpartition(".")
        assert callable(getattr(importlib.import_module(module), name))
