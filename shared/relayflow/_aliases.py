"""Old names kept working after a rename: a module's ``__getattr__`` that finds the new
object and warns (``DeprecationWarning``) that the name is going away."""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable, Mapping
from typing import Any


def renamed(module: str, moved: Mapping[str, tuple[str, str]]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``module`` resolving each old name in ``moved`` to its
    ``(new module, new name)``, with a warning naming the new place."""

    def __getattr__(name: str) -> Any:
        if name not in moved:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        new_module, new_name = moved[name]
        warnings.warn(
            f"{module}.{name} is now {new_module}.{new_name}", DeprecationWarning, stacklevel=2
        )
        return getattr(importlib.import_module(new_module), new_name)

    return __getattr__
