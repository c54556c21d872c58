"""The wall clock is read in one place (``relayflow.clock``).

ruff's banned-api rule enforces it where TID251 is on; the packages that may import boto3
(``adapters/aws``, ``local``) switch that rule off for boto3, so this scan covers every file.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "shared" / "relayflow"
CLOCK_MODULE = PACKAGE / "clock.py"
BANNED = {("time", "time"), ("time", "time_ns"), ("datetime", "now"), ("datetime", "utcnow")}


def wall_clock_reads(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and (node.value.id, node.attr) in BANNED
        ):
            found.append(f"{path.relative_to(PACKAGE)}:{node.lineno} {node.value.id}.{node.attr}")
        if isinstance(node, ast.ImportFrom) and node.module == "time":
            found.extend(
                f"{path.relative_to(PACKAGE)}:{node.lineno} from time import {alias.name}"
                for alias in node.names
                if alias.name in {"time", "time_ns"}
            )
    return found


@pytest.mark.parametrize(
    "path",
    [p for p in sorted(PACKAGE.rglob("*.py")) if p != CLOCK_MODULE],
    ids=lambda p: str(p.relative_to(PACKAGE)),
)
def test_no_module_but_the_clock_reads_the_wall_clock(path: Path) -> None:
    assert wall_clock_reads(path) == []


def test_the_scan_finds_a_wall_clock_read() -> None:
    assert wall_clock_reads(CLOCK_MODULE), "the clock module itself reads it"
