"""Query values whose rules the OpenAPI document states exactly: instants given as epoch
milliseconds or RFC 3339 date-times (``since``/``until`` of the run listing)."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

from relayflow.api.errors import ApiError

#: Epoch milliseconds: up to 15 digits (the width of the listing indexes' time keys).
EPOCH_MS_PATTERN = r"^[0-9]{1,15}$"
_EPOCH_MS = re.compile(EPOCH_MS_PATTERN)
#: RFC 3339 ``date-time`` (JSON Schema's format): seconds and a timezone are required.
_DATE_TIME = re.compile(
    r"^([0-9]{4})-([0-9]{2})-([0-9]{2})T([0-9]{2}):([0-9]{2}):([0-9]{2})(?:\.([0-9]+))?"
    r"(?:Z|([+-])([0-9]{2}):([0-9]{2}))$"
)
#: The document's schema of an instant parameter.
INSTANT_SCHEMA: dict[str, Any] = {
    "anyOf": [
        {"type": "string", "pattern": EPOCH_MS_PATTERN},
        {"type": "string", "format": "date-time"},
    ]
}
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def parse_instant(name: str, value: str | None) -> int | None:
    """Epoch ms of a query instant (None when absent); 400 ``invalid_query`` if it is neither
    form, or names no real time (a 30 February, minute 61)."""
    if value is None:
        return None
    if _EPOCH_MS.fullmatch(value):
        return int(value)
    match = _DATE_TIME.fullmatch(value)
    try:
        moment = _moment(match) if match else None
    except ValueError:
        moment = None
    if moment is None:
        raise ApiError(
            400,
            "invalid_query",
            f"query parameter '{name}': expected epoch milliseconds or an RFC 3339 date-time "
            "such as 2026-12-05T10:00:00Z",
        )
    # Subtracting aware datetimes never leaves datetime's range (years 1 to 9999 with offsets).
    return (moment - _EPOCH) // timedelta(milliseconds=1)


def _moment(match: re.Match[str]) -> datetime:
    """The datetime of an RFC 3339 match; ``ValueError`` when it names no real time."""
    year, month, day, hour, minute, second = (int(match.group(i)) for i in range(1, 7))
    fraction = match.group(7) or ""
    microsecond = int(fraction[:6].ljust(6, "0")) if fraction else 0
    offset = timedelta(0)
    if match.group(8):
        hours, minutes = int(match.group(9)), int(match.group(10))
        if hours > 23 or minutes > 59:
            raise ValueError("offset out of range")
        offset = timedelta(hours=hours, minutes=minutes)
        offset = -offset if match.group(8) == "-" else offset
    return datetime(year, month, day, hour, minute, second, microsecond, timezone(offset))
