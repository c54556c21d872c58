"""Paths into an event envelope (``data.items[0].sku``), shared by predicates and input mappers.

Roots are ``data``, ``metadata``, ``name`` and ``emittedAt``. A path that cannot be parsed or
walked resolves to ``MISSING``; resolution never raises.
"""

from __future__ import annotations

import math
from typing import Any

from relayflow.events.jsvalue import MISSING, get_property, js_number_from_string

ROOTS = frozenset({"data", "metadata", "name", "emittedAt"})

Segment = str | int


def parse_path(path: object) -> list[Segment]:
    """Split a path into key segments (str) and bracket indices (int).

    ``.`` separates segments and empty segments are dropped; ``[N]`` yields an index whose
    content is read like JavaScript ``Number()`` (trimmed, ``[]`` is 0, ``0x1`` and ``2e0``
    are accepted) and must be a non-negative integer; text right after ``]`` starts a new
    segment. A missing ``]`` or a bad index makes the whole path unparseable: ``[]`` is
    returned, as for a non-string or empty path.
    """
    if not isinstance(path, str) or not path:
        return []
    segments: list[Segment] = []
    buf: list[str] = []
    i = 0
    length = len(path)
    while i < length:
        ch = path[i]
        if ch == ".":
            if buf:
                segments.append("".join(buf))
                buf = []
            i += 1
        elif ch == "[":
            if buf:
                segments.append("".join(buf))
                buf = []
            end = path.find("]", i)
            if end == -1:
                return []
            index = js_number_from_string(path[i + 1 : end])
            if math.isnan(index) or math.isinf(index) or index != int(index) or index < 0:
                return []
            segments.append(int(index))
            i = end + 1
        else:
            buf.append(ch)
            i += 1
    if buf:
        segments.append("".join(buf))
    return segments


def root_value(envelope: object, root: str) -> Any:
    """The envelope's value at a root name, or ``MISSING``."""
    if isinstance(envelope, dict):
        return envelope.get(root, MISSING)
    return MISSING


def resolve_path(path: object, envelope: object) -> Any:
    """Resolve a path against an envelope ``{name, data?, metadata?, emittedAt}``.

    A null or missing intermediate value, an index on a non-list, a key on a non-object
    (strings have no properties) or an unknown root give ``MISSING``. Keys reach own members
    only: dicts by key, lists by canonical index strings (``items.0``); there is no prototype
    chain, so ``length`` or ``constructor`` are simply missing.
    """
    segments = parse_path(path)
    if not segments:
        return MISSING
    root = segments[0]
    if not isinstance(root, str) or root not in ROOTS:
        return MISSING
    return walk_path(root_value(envelope, root), segments[1:])


def walk_path(value: Any, segments: list[Segment]) -> Any:
    """Follow parsed ``segments`` from ``value`` the way :func:`resolve_path` does past its
    root; ``MISSING`` when a step finds nothing."""
    for segment in segments:
        if value is None or value is MISSING:
            return MISSING
        if isinstance(segment, int):
            if not isinstance(value, (list, tuple)) or segment >= len(value):
                return MISSING
            value = value[segment]
        else:
            value = get_property(value, segment)
    return value
