"""``relayflow init [DIR]``: a project to grow from: workflows, their test, a CDK app.

The files come from the templates shipped in the package (``cli/templates/project``). Nothing
is overwritten: when any of them exists already, nothing is written at all.
"""

from __future__ import annotations

import argparse
import keyword
import re
from dataclasses import dataclass
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from string import Template
from typing import TextIO

__all__ = ["InitError", "ProjectNames", "add_init_command", "planned_files", "scaffold"]

_TEMPLATES = ("templates", "project")
_SUFFIX = ".tmpl"
_PACKAGE_DIR = "__package__"
#: Template files whose name a package index or git would not keep as it is.
_RENAMED = {"gitignore": ".gitignore"}


class InitError(Exception):
    """The project cannot be written (a file exists, the folder is unusable)."""


@dataclass(frozen=True)
class ProjectNames:
    """The names a scaffold uses, derived from its folder's name.

    Attributes:
        name: The distribution name (``shop-flows``).
        package: The importable package holding the workflows (``shop_flows``).
        stack: The CloudFormation stack name (``ShopFlows``).
    """

    name: str
    package: str
    stack: str

    @classmethod
    def for_folder(cls, folder: Path) -> ProjectNames:
        """Names for a project in ``folder`` (its last path component)."""
        base = folder.resolve().name
        words = [w for w in re.split(r"[^0-9A-Za-z]+", base) if w] or ["workflows"]
        package = "_".join(w.lower() for w in words)
        if package[0].isdigit() or keyword.iskeyword(package):
            package = f"app_{package}"
        name = "-".join(w.lower() for w in words)
        stack = "".join(w[:1].upper() + w[1:] for w in words)
        if not stack[0].isalpha():
            stack = f"App{stack}"
        return cls(name=name, package=package, stack=stack)


def _template_root() -> Traversable:
    root = resources.files("relayflow.cli")
    for part in _TEMPLATES:
        root = root / part
    return root


def _walk(folder: Traversable, relative: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], str]]:
    found: list[tuple[tuple[str, ...], str]] = []
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if entry.is_dir():
            found += _walk(entry, (*relative, entry.name))
        elif entry.name.endswith(_SUFFIX):
            found.append(((*relative, entry.name), entry.read_text(encoding="utf-8")))
    return found


def planned_files(folder: Path, names: ProjectNames) -> dict[Path, str]:
    """Every file ``relayflow init`` writes in ``folder``, with its content."""
    values = {"name": names.name, "package": names.package, "stack": names.stack}
    files: dict[Path, str] = {}
    for parts, text in _walk(_template_root()):
        *dirs, leaf = parts
        leaf = leaf.removesuffix(_SUFFIX)
        target = folder.joinpath(
            *(names.package if d == _PACKAGE_DIR else d for d in dirs), _RENAMED.get(leaf, leaf)
        )
        files[target] = Template(text).substitute(values)
    return files


def scaffold(folder: Path) -> tuple[ProjectNames, list[Path]]:
    """Write a new project into ``folder`` (created when missing); returns what was written.

    Raises:
        InitError: ``folder`` is a file, or one of the files exists (then nothing is written).
    """
    if folder.exists() and not folder.is_dir():
        raise InitError(f"{folder} is a file, not a folder")
    names = ProjectNames.for_folder(folder)
    files = planned_files(folder, names)
    existing = [path for path in files if path.exists()]
    if existing:
        shown = ", ".join(str(p) for p in existing[:3]) + (", ..." if len(existing) > 3 else "")
        raise InitError(
            f"{shown} already exist{'s' if len(existing) == 1 else ''}; nothing was written "
            "(run relayflow init in an empty folder, or name a new one: relayflow init DIR)"
        )
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return names, sorted(files)


def add_init_command(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``relayflow init``."""
    p = sub.add_parser(
        "init", help="scaffold a project: workflows, their test, a CDK app, pyproject.toml"
    )
    p.add_argument("folder", metavar="DIR", nargs="?", default=".", help="where (%(default)s)")


def run_init(args: argparse.Namespace, *, out: TextIO, err: TextIO) -> int:
    """``relayflow init [DIR]``; returns the exit status (2 when nothing could be written)."""
    folder = Path(args.folder)
    try:
        names, written = scaffold(folder)
    except InitError as exc:
        err.write(f"relayflow init: {exc}\n")
        return 2
    except OSError as exc:
        err.write(f"relayflow init: cannot write {folder}: {exc.strerror or exc}\n")
        return 2
    out.write(f"relayflow init: wrote {len(written)} files in {folder}\n")
    for path in written:
        out.write(f"  {path.relative_to(folder)}\n")
    steps = [] if folder.resolve() == Path.cwd() else [f"cd {folder}"]
    steps += [f"relayflow dev --app {names.package}.workflows --reload", "pytest"]
    out.write("\nNext:\n" + "".join(f"  {step}\n" for step in steps))
    return 0
