"""Importing a user's app module (its workflows and event filters) and building its manifest."""

from __future__ import annotations

import importlib
import os
import sys
from types import ModuleType
from typing import Any


class AppLoadError(Exception):
    """The app module could not be imported."""


def put_working_directory_on_path() -> None:
    """Let the current directory's modules be imported, as ``python -m`` would.

    The ``relayflow`` console script starts with its own folder first on ``sys.path``, not the
    current directory where a project's workflows usually live.
    """
    cwd = os.getcwd()
    if cwd not in sys.path:
        sys.path.insert(0, cwd)


def load_app(module: str) -> ModuleType:
    """Import ``module`` (from the current directory too), registering its workflows.

    Raises:
        AppLoadError: The module (or something it imports) is missing, does not parse, or
            raises while it is imported (a workflow declared wrongly, for example).
    """
    put_working_directory_on_path()
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise AppLoadError(f"cannot import app module {module!r}: {exc}") from exc
    except SyntaxError as exc:
        raise AppLoadError(
            f"app module {module!r} has a syntax error: {exc.filename}:{exc.lineno}: {exc.msg}"
        ) from exc
    except Exception as exc:
        # A workflow defined wrongly fails here, at import: say so with the module's name.
        raise AppLoadError(f"importing app module {module!r} failed: {exc}") from exc


def build_app_manifest(environment: str) -> dict[str, Any]:
    """The manifest of every registered workflow and ``trigger_on`` filter."""
    from relayflow.events.manifest import build_manifest
    from relayflow.sdk.registry import registered_workflows

    return build_manifest(environment=environment, workflows=registered_workflows())
