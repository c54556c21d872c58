"""Durations as the reference writes them: milliseconds, ``<n>ms|s|m|h|d|w`` or a timedelta."""

from __future__ import annotations

import re
from datetime import timedelta

Duration = int | str | timedelta
"""A duration: an int of milliseconds, a string such as ``"10m"``, or a ``timedelta``."""

_ACCEPTED = (
    'an int of milliseconds (1500), a string "<n><unit>" with unit ms, s, m, h, d or w '
    '("500ms", "30s", "10m", "2h", "1d", "1w"), or a datetime.timedelta'
)
#: The grammar of a duration string (also the pattern of the HTTP API's duration fields).
DURATION_PATTERN = r"^(\d+)(ms|s|m|h|d|w)$"
#: A duration string longer than zero.
POSITIVE_DURATION_PATTERN = r"^(0*[1-9]\d*)(ms|s|m|h|d|w)$"
_PATTERN = re.compile(DURATION_PATTERN)
_UNIT_MS = {"ms": 1, "s": 1_000, "m": 60_000, "h": 3_600_000, "d": 86_400_000, "w": 604_800_000}


def parse_duration(value: object, *, what: str = "duration") -> int:
    """Convert a duration to milliseconds.

    Args:
        value: An int of milliseconds, a string matching ``^(\\d+)(ms|s|m|h|d|w)$`` or a
            ``datetime.timedelta``.

    Returns:
        The duration in whole milliseconds.

    Raises:
        ValueError: The value is not a duration (negative, fractional string, compound form,
            uppercase unit, whitespace, wrong type). The message names the value.
    """
    if isinstance(value, bool):
        raise _invalid(what, value)
    if isinstance(value, int):
        if value < 0:
            raise _invalid(what, value, "negative")
        return value
    if isinstance(value, timedelta):
        ms = value // timedelta(milliseconds=1)
        if ms < 0:
            raise _invalid(what, value, "negative")
        return ms
    if isinstance(value, str):
        match = _PATTERN.match(value)
        if match is None:
            raise _invalid(what, value)
        return int(match.group(1)) * _UNIT_MS[match.group(2)]
    raise _invalid(what, value)


def _invalid(what: str, value: object, why: str = "") -> ValueError:
    note = f" ({why})" if why else ""
    of = "" if what == "duration" else f" for {what}"
    return ValueError(f"invalid duration{of}: {value!r}{note}; write {_ACCEPTED}")


def parse_optional_duration(value: object, *, what: str = "duration") -> int | None:
    """Like :func:`parse_duration`, but ``None`` stays ``None``."""
    return None if value is None else parse_duration(value, what=what)
