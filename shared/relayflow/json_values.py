"""What may be stored as a JSON value: finite numbers, strings, booleans, null, lists, objects.

A value is checked as it is given, before anything converts it: a converter would turn a set
into a list, a tuple key into the string ``"1,2"``, bytes or a UUID into text, and the run
would then hold something else than the code gave it. Python's ``json`` writes ``NaN`` and
``Infinity``, which are not JSON (other parsers refuse them) and which some serialisers
silently turn into ``null``. Such values are refused where they enter a run, naming where in
the value the problem is. Tuples are arrays.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["NonJson", "find_non_json", "non_json_reason"]

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class NonJson:
    """Where a value stops being JSON (``$.items[3].key``) and why."""

    path: str
    problem: str

    def __str__(self) -> str:
        return f"{self.path} {self.problem}"


def _member(path: str, key: str) -> str:
    return f"{path}.{key}" if _NAME.match(key) else f"{path}[{json.dumps(key)}]"


def _problem(item: Any) -> str:
    kind = type(item).__name__
    if isinstance(item, set | frozenset):
        return f"is a {kind}, which JSON cannot hold (use a list)"
    if isinstance(item, bytes | bytearray | memoryview):
        return f"is {kind}, which JSON cannot hold (decode it, or encode it as base64 text)"
    return f"is a {kind}, which is not a JSON value"


#: Where a walk is in a value: ``(where its container is, key or index)``, or None at the
#: top. Paths are only spelled out for the one place that is reported.
_Trail = tuple[Any, str | int] | None

_SCALARS = (str, int, type(None))  # bool is an int
_SEQUENCES = (list, tuple)


def _spell(path: str, trail: _Trail) -> str:
    segments: list[str | int] = []
    while trail is not None:
        trail, segment = trail
        segments.append(segment)
    for segment in reversed(segments):
        path = f"{path}[{segment}]" if isinstance(segment, int) else _member(path, segment)
    return path


def find_non_json(
    value: Any, path: str = "$", *, dumped_by: Callable[[Any], bool] | None = None
) -> NonJson | None:
    """The first place where ``value`` is not a plain JSON value, or None when it is one.

    ``dumped_by`` tells the objects a dumper turns into JSON itself (pydantic models,
    dataclasses); they are taken as they are and not looked into.
    """
    stack: list[tuple[Any, _Trail]] = [(value, None)]
    while stack:
        item, trail = stack.pop()
        if isinstance(item, _SCALARS):
            continue
        if isinstance(item, float):
            if not math.isfinite(item):
                problem = f"is {item!r}, which JSON cannot hold (use null or a string)"
                return NonJson(_spell(path, trail), problem)
            continue
        if isinstance(item, _SEQUENCES):
            stack.extend((item[i], (trail, i)) for i in range(len(item) - 1, -1, -1))
            continue
        if isinstance(item, dict):
            for key in item:
                if not isinstance(key, str):
                    problem = (
                        f"has the key {key!r} (a {type(key).__name__}), but JSON object keys "
                        "are strings"
                    )
                    return NonJson(_spell(path, trail), problem)
            stack.extend((child, (trail, key)) for key, child in reversed(item.items()))
            continue
        if dumped_by is not None and dumped_by(item):
            continue
        return NonJson(_spell(path, trail), _problem(item))
    return None


def non_json_reason(value: Any, path: str = "$") -> str | None:
    """Why ``value`` is not a plain JSON value (naming where in it), or None when it is."""
    found = find_non_json(value, path)
    return None if found is None else str(found)
