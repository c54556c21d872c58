"""``relayflow init [DIR]`` writes a project from the packaged templates, never over a file."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from relayflow.cli import main
from relayflow.cli.init import ProjectNames

EXPECTED = {
    ".gitignore",
    "README.md",
    "app.py",
    "cdk.json",
    "pyproject.toml",
    "shop_flows/__init__.py",
    "shop_flows/workflows.py",
    "tests/test_workflows.py",
}


def _init(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    status = main(["init", *argv], stdout=out, stderr=err)
    return status, out.getvalue(), err.getvalue()


def _tree(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()}


def test_init_writes_a_project_named_after_its_folder(tmp_path: Path) -> None:
    folder = tmp_path / "shop-flows"
    status, out, err = _init(str(folder))
    assert (status, err) == (0, "")
    assert _tree(folder) == EXPECTED
    pyproject = (folder / "pyproject.toml").read_text()
    assert 'name = "shop-flows"' in pyproject and 'packages = ["shop_flows"]' in pyproject
    assert '"relayflow[local,cdk]"' in pyproject
    assert 'InlineStepHost(module="shop_flows.workflows")' in (folder / "app.py").read_text()
    assert 'Stack(app, "ShopFlows")' in (folder / "app.py").read_text()
    assert (
        "from shop_flows.workflows import process_order"
        in (folder / "tests" / "test_workflows.py").read_text()
    )
    readme = (folder / "README.md").read_text()
    assert "relayflow dev --app shop_flows.workflows --reload" in readme and "pytest" in readme
    for path in folder.rglob("*"):
        if path.is_file():
            assert "$" not in path.read_text(), f"{path} kept a template placeholder"
    assert "relayflow dev --app shop_flows.workflows --reload" in out
    assert f"cd {folder}" in out


def test_init_writes_python_that_compiles(tmp_path: Path) -> None:
    assert _init(str(tmp_path / "p"))[0] == 0
    for path in (tmp_path / "p").rglob("*.py"):
        compile(path.read_text(), str(path), "exec")


def test_init_in_the_current_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "billing"
    folder.mkdir()
    monkeypatch.chdir(folder)
    status, out, _ = _init()
    assert status == 0
    assert "billing/workflows.py" in _tree(folder)
    assert "cd " not in out


def test_init_refuses_to_overwrite_and_writes_nothing(tmp_path: Path) -> None:
    folder = tmp_path / "shop"
    folder.mkdir()
    (folder / "app.py").write_text("# mine\n")
    status, out, err = _init(str(folder))
    assert status == 2 and out == ""
    assert err == (
        f"relayflow init: {folder / 'app.py'} already exists; nothing was written "
        "(run relayflow init in an empty folder, or name a new one: relayflow init DIR)\n"
    )
    assert _tree(folder) == {"app.py"}
    assert (folder / "app.py").read_text() == "# mine\n"


def test_init_into_a_file_is_refused(tmp_path: Path) -> None:
    target = tmp_path / "notes.txt"
    target.write_text("x")
    status, _, err = _init(str(target))
    assert status == 2 and err == f"relayflow init: {target} is a file, not a folder\n"


@pytest.mark.parametrize(
    ("folder", "name", "package", "stack"),
    [
        ("shop", "shop", "shop", "Shop"),
        ("My Flows", "my-flows", "my_flows", "MyFlows"),
        ("2fast", "2fast", "app_2fast", "App2fast"),
        ("class", "class", "app_class", "Class"),
        ("___", "workflows", "workflows", "Workflows"),
    ],
)
def test_project_names_are_valid_identifiers(
    tmp_path: Path, folder: str, name: str, package: str, stack: str
) -> None:
    names = ProjectNames.for_folder(tmp_path / folder)
    assert (names.name, names.package, names.stack) == (name, package, stack)
    assert names.package.isidentifier()
