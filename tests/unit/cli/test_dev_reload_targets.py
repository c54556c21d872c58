"""What ``relayflow dev --reload`` watches for each kind of ``--app``."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from relayflow.local.reload import WatchedCode, watched_code


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty project folder as the current directory, with sys.path restored afterwards."""
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", ".")])
    monkeypatch.chdir(tmp_path)
    return tmp_path.resolve()


def test_a_module_in_the_current_folder_is_watched_through_its_folder(project: Path) -> None:
    (project / "rl_flows_module.py").write_text("")
    assert watched_code("rl_flows_module") == WatchedCode(folders=(project,), recursive=False)


def test_a_package_module_is_watched_through_the_whole_package(project: Path) -> None:
    (project / "rl_shop" / "orders").mkdir(parents=True)
    (project / "rl_shop" / "__init__.py").write_text("")
    (project / "rl_shop" / "orders" / "__init__.py").write_text("")
    expected = WatchedCode(folders=(project / "rl_shop",), recursive=True)
    assert watched_code("rl_shop.orders.flows") == expected


def test_an_installed_package_is_watched_where_it_is_installed(project: Path) -> None:
    installed = Path(json.__file__).resolve().parent
    assert watched_code("json.decoder") == WatchedCode(folders=(installed,), recursive=True)


@pytest.mark.parametrize("app", [None, "", "rl_no_such_module", "rl_no_such.module"])
def test_nothing_is_watched_without_a_module(project: Path, app: str | None) -> None:
    assert watched_code(app) is None
