"""The Python examples of the README and of every docs page run as printed.

Each page's blocks run in order, in one namespace per page, like a reader who pastes them one
after the other; every block is its own test, named by page and line. A block that needs what
a test cannot give (your own package, a server, AWS) is reported as skipped, with the reason.
Example tests a page defines (``def test_...``) run right after the block that defines them.
A ``print(...)`` followed by a comment shows what it prints: the block must print a line that
the comment describes (``...`` and ``<what>`` stand for any text).
"""

from __future__ import annotations

import contextlib
import io
import re
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from relayflow.events import filters as filter_registry
from relayflow.sdk import registry as workflow_registry

ROOT = Path(__file__).resolve().parents[2]
PAGES = (ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md")))
FENCE = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)
PRINTED = re.compile(r"^\s*print\(.*\)  # (?P<shown>.+)$", re.MULTILINE)
PLACEHOLDER = re.compile(r"\\\.\\\.\\\.|<[^>]+>")
#: Why a block cannot run in a test, by a text it contains.
NOT_RUNNABLE = {
    "my_app": "imports the reader's own package",
    "serve_forever": "starts a server that never returns",
    "from aws_cdk": "synthesises a CDK app (tests/infra covers the construct)",
    "Settings.from_env()": "reads a deployment's environment",
}


@dataclass(frozen=True)
class Block:
    """One fenced Python block: where it is and what it says."""

    page: Path
    line: int
    index: int
    code: str

    @property
    def name(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"

    @property
    def skip_reason(self) -> str | None:
        return next((why for text, why in NOT_RUNNABLE.items() if text in self.code), None)


def page_blocks(page: Path) -> list[Block]:
    """The page's Python blocks, with the line each starts on."""
    text = page.read_text(encoding="utf-8")
    return [
        Block(page, text.count("\n", 0, found.start()) + 1, index, found.group(1))
        for index, found in enumerate(FENCE.finditer(text))
    ]


BLOCKS = [block for page in PAGES for block in page_blocks(page)]


@dataclass
class PageState:
    """A page's namespace and the registries as its blocks left them, after block ``done``."""

    done: int
    namespace: dict[str, Any]
    workflows: dict[str, Any]
    filters: dict[str, Any]


#: Per page, the state after the last block that ran in this process: the next block of the
#: page goes on from it instead of running the page again from its top.
_STATES: dict[Path, PageState] = {}


@pytest.fixture
def isolated_registries() -> Iterator[None]:
    """The examples register workflows and filters; other tests must not see them."""
    workflows = dict(workflow_registry._REGISTRY)
    filters = dict(filter_registry._registry)
    yield
    workflow_registry._REGISTRY.clear()
    workflow_registry._REGISTRY.update(workflows)
    filter_registry._registry.clear()
    filter_registry._registry.update(filters)


def shown_output(block: Block) -> list[tuple[str, re.Pattern[str]]]:
    """What the block's commented ``print`` lines say they print, in order."""
    shown = [found["shown"].strip() for found in PRINTED.finditer(block.code)]
    return [(text, re.compile(PLACEHOLDER.sub(".+", re.escape(text)))) for text in shown]


def missing_output(expected: list[tuple[str, re.Pattern[str]]], printed: str) -> list[str]:
    """The expected lines not printed, in order (each after the one before)."""
    lines = iter(printed.splitlines())
    return [
        text
        for text, pattern in expected
        if not any(pattern.fullmatch(line.strip()) for line in lines)
    ]


def _run(block: Block, namespace: dict[str, Any]) -> None:
    before = {name for name in namespace if name.startswith("test_")}
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(block.code, block.name, "exec"), namespace)
    missing = missing_output(shown_output(block), printed.getvalue())
    assert not missing, f"not printed: {missing}; printed: {printed.getvalue()!r}"
    for name, example_test in list(namespace.items()):
        if name.startswith("test_") and name not in before and callable(example_test):
            example_test()


def _state_before(block: Block) -> PageState:
    """The page's state just before ``block``: kept from the block before, or rebuilt."""
    earlier = [b for b in page_blocks(block.page)[: block.index] if b.skip_reason is None]
    kept = _STATES.get(block.page)
    if kept is not None and kept.done == (earlier[-1].index if earlier else -1):
        workflow_registry._REGISTRY.clear()
        workflow_registry._REGISTRY.update(kept.workflows)
        filter_registry._registry.clear()
        filter_registry._registry.update(kept.filters)
        return kept
    namespace: dict[str, Any] = {"__name__": "docs_example"}
    for before in earlier:
        _run(before, namespace)
    return PageState(block.index - 1, namespace, {}, {})


def test_the_docs_have_runnable_examples() -> None:
    runnable = [b for b in BLOCKS if b.skip_reason is None]
    assert len(runnable) >= 20
    assert {b.page.name for b in runnable} >= {"README.md", "workflows.md", "testing.md"}


@pytest.mark.usefixtures("isolated_registries")
@pytest.mark.parametrize("block", BLOCKS, ids=[b.name for b in BLOCKS])
def test_the_example_runs_as_printed(block: Block) -> None:
    if block.skip_reason is not None:
        pytest.skip(block.skip_reason)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # examples re-register workflow ids on purpose
        state = _state_before(block)
        try:
            _run(block, state.namespace)
        except Exception as exc:  # the page, line and code are what a reader needs to fix it
            pytest.fail(f"{block.name} failed: {exc!r}\n{block.code}")
    _STATES[block.page] = PageState(
        block.index,
        state.namespace,
        dict(workflow_registry._REGISTRY),
        dict(filter_registry._registry),
    )
