"""Flow-control keys: a path into the run's input or its event, or a function of the input.

Paths use the grammar of input mappers (``input.customer.id``, ``event.data.items[0].sku``)
under two roots: ``input`` (the run's input) and ``event`` (the envelope that triggered the
run: ``data``, ``metadata``, ``name``, ``emittedAt``). A path under neither root reads the
input (``customerId`` is ``input.customerId``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from relayflow.events.jsvalue import MISSING, format_js_number
from relayflow.events.paths import Segment, parse_path, walk_path
from relayflow.flow.errors import FlowControlError, FlowKeyMissingError

FlowKey = str | Callable[[Any], Any]
"""A key declaration: a path string or a function of the run's input."""

#: Longest resolved key kept (longer values are refused, not cut).
MAX_RESOLVED_KEY = 256


def _segments(key: str) -> list[Segment]:
    """The key's path from its root: ``input.a`` and a bare ``a`` both read the input."""
    segments = parse_path(key)
    if segments[:1] in (["input"], ["event"]):
        return segments
    return ["input", *segments]


def check_key(key: object, what: str, *, required: bool) -> None:
    """Refuse a key that is neither a parseable path nor a function (nor None, when not
    ``required``)."""
    if key is None and not required:
        return
    if callable(key):
        return
    if not isinstance(key, str) or not parse_path(key) or len(_segments(key)) < 2:
        raise FlowControlError(
            f"{what} must be a path into the input or the event (such as 'customerId', "
            f"'input.customer.id' or 'event.data.customerId') or a function of the input, "
            f"got {key!r}"
        )


def key_to_wire(key: FlowKey) -> str:
    """The path of a key declaration, as it is written in manifests and request bodies."""
    if callable(key):
        raise FlowControlError("a function key has no wire form; declare a path to send it")
    return key


def _as_key(value: Any) -> str | None:
    if isinstance(value, bool) or value is None or value is MISSING:
        return None
    if isinstance(value, str):
        return value or None
    if isinstance(value, int | float):
        return format_js_number(value)
    return None


def resolve_key(key: FlowKey, input: Any, event: Any = None, *, what: str = "key") -> str:
    """The key's value for a run: a non-empty string (numbers are written as JavaScript
    writes them).

    Raises:
        FlowKeyMissingError: The path finds nothing, or something that is not a string or a
            number, or the function returns such a value.
    """
    if callable(key):
        value = key(input)
        source = f"{what} function"
    else:
        segments = _segments(key)
        if segments[0] == "event":
            value = walk_path(event, segments[1:]) if isinstance(event, dict) else MISSING
        else:
            value = walk_path(input, segments[1:])
        source = f"{what} {key!r}"
    resolved = _as_key(value)
    if resolved is None:
        raise FlowKeyMissingError(
            f"{source} found no string or number in the run's "
            f"{'event' if not callable(key) and _segments(key)[0] == 'event' else 'input'}"
        )
    if len(resolved) > MAX_RESOLVED_KEY:
        raise FlowKeyMissingError(
            f"{source} gave a value of {len(resolved)} characters; at most "
            f"{MAX_RESOLVED_KEY} are kept"
        )
    return resolved
