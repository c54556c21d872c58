"""The README's Python examples run as printed (in order, in one namespace, like a reader would)."""

from __future__ import annotations

import re
import warnings
from pathlib import Path
from typing import Any

import pytest

from relayflow.events import filters as filter_registry
from relayflow.sdk import registry as workflow_registry

README = Path(__file__).resolve().parents[2] / "README.md"
BLOCK = re.compile(r"```python\n(.*?)```", re.DOTALL)
#: Blocks that need something a test cannot give: your own package, a server, or AWS.
NOT_RUNNABLE = ("my_app", "serve_forever", "from aws_cdk", "Settings.from_env()")


def readme_blocks() -> list[str]:
    return [b for b in BLOCK.findall(README.read_text()) if not any(m in b for m in NOT_RUNNABLE)]


def test_the_readme_has_runnable_examples() -> None:
    assert len(readme_blocks()) >= 8


@pytest.fixture
def isolated_registries() -> Any:
    """The examples register workflows and filters; other tests must not see them."""
    workflows = dict(workflow_registry._REGISTRY)
    filters = dict(filter_registry._registry)
    yield
    workflow_registry._REGISTRY.clear()
    workflow_registry._REGISTRY.update(workflows)
    filter_registry._registry.clear()
    filter_registry._registry.update(filters)


@pytest.mark.usefixtures("isolated_registries")
def test_every_runnable_readme_example_runs(capsys: pytest.CaptureFixture[str]) -> None:
    namespace: dict[str, Any] = {"__name__": "readme"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # examples re-register workflow ids on purpose
        for index, block in enumerate(readme_blocks()):
            try:
                exec(compile(block, f"README block {index}", "exec"), namespace)
            except Exception as exc:  # pragma: no cover - the failure message is the point
                pytest.fail(f"README block {index} failed: {exc!r}\n{block}")
        tests = [fn for name, fn in namespace.items() if name.startswith("test_")]
        assert tests, "the testing section defines example tests"
        for fn in tests:
            fn()
