"""What may be stored as a JSON value: finite numbers, strings, booleans, null, lists, objects.

Python's ``json`` writes ``NaN`` and ``Infinity``, which are not JSON (other parsers refuse
them) and which some serialisers silently turn into ``null``; both would change a value behind
the user's back, so such values are refused where they enter a run.
"""

from __future__ import annotations

import math
from typing import Any

__all__ = ["non_json_reason"]


def non_json_reason(value: Any, path: str = "$") -> str | None:
    """Why ``value`` is not a plain JSON value (naming where in it), or None when it is."""
    stack: list[tuple[Any, str]] = [(value, path)]
    while stack:
        item, where = stack.pop()
        if item is None or isinstance(item, bool | str | int):
            continue
        if isinstance(item, float):
            if not math.isfinite(item):
                return f"{where} is {item!r}, which JSON cannot hold (use null or a string)"
            continue
        if isinstance(item, list | tuple):
            stack.extend((v, f"{where}[{i}]") for i, v in reversed(list(enumerate(item))))
            continue
        if isinstance(item, dict):
            for key, child in reversed(list(item.items())):
                if not isinstance(key, str):
                    return f"{where} has the key {key!r}, but JSON object keys are strings"
                stack.append((child, f"{where}.{key}"))
            continue
        return f"{where} is a {type(item).__name__}, which is not a JSON value"
    return None
