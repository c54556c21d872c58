"""What every audit log store shares: the order of entries, the time window a listing walks,
its filters and its cursor.

Entries are ordered newest first by their sort key ``<at, 15 digits>#<id>`` and then by
environment, so one order holds across the per-environment partitions a listing merges.
A cursor is the position of the last entry a page gave; the day to go on from is the one of
that entry's time.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import NamedTuple

from relayflow.errors import ValidationError
from relayflow.operations.ports import AuditEntry, AuditQuery
from relayflow.protocol import ENVIRONMENTS

DAY_MS = 24 * 60 * 60 * 1000
#: How far back a listing without ``since`` goes.
DEFAULT_WINDOW_MS = 90 * DAY_MS
#: How long an entry is kept (the runs table's TTL removes it then).
RETENTION_DAYS = 400
MAX_LIMIT = 1000
#: Width of the time in a sort key: epoch milliseconds up to the year 33658.
_TIME_DIGITS = 15
_SORT_KEY = re.compile(r"^[0-9]{15}#.+$", re.DOTALL)


class AuditPosition(NamedTuple):
    """Where an entry sits in the newest-first order (compare as tuples, larger is newer)."""

    sort_key: str
    environment: str


def sort_key(at: int, entry_id: str) -> str:
    """The sort key of an entry recorded at ``at`` (epoch ms) with id ``entry_id``."""
    return f"{at:0{_TIME_DIGITS}d}#{entry_id}"


def time_prefix(at: int) -> str:
    """The sort key's time part alone: every key of ``at`` starts with it."""
    return f"{at:0{_TIME_DIGITS}d}"


def position_of(entry: AuditEntry) -> AuditPosition:
    """The entry's place in the order."""
    return AuditPosition(sort_key(entry.at, entry.id), entry.environment)


def utc_day(at: int) -> str:
    """The UTC day of ``at`` as ``YYYY-MM-DD`` (the entry's partition)."""
    return datetime.fromtimestamp(at / 1000, UTC).strftime("%Y-%m-%d")


def expires_at_s(at: int) -> int:
    """The TTL (epoch seconds) of an entry recorded at ``at``."""
    return (at + RETENTION_DAYS * DAY_MS) // 1000


def environments_of(query: AuditQuery) -> tuple[str, ...]:
    """The environments a listing reads: the one asked for, else every one relayflow runs."""
    return (query.environment,) if query.environment is not None else ENVIRONMENTS


@dataclass(frozen=True)
class AuditWindow:
    """The validated bounds of one listing: ``since <= at < until``, resumed before
    ``after`` (the cursor's position) when there is one."""

    since: int
    until: int
    limit: int
    after: AuditPosition | None

    def days(self) -> list[str]:
        """The UTC days the window spans, newest first (from the cursor's day when given)."""
        newest = self.until - 1
        if self.after is not None:
            newest = min(newest, int(self.after.sort_key[:_TIME_DIGITS]))
        days: list[str] = []
        moment = newest
        while moment >= self.since:
            day = utc_day(moment)
            days.append(day)
            moment = _start_of(day) - 1
        return days

    def admits(self, entry: AuditEntry) -> bool:
        """Within the time bounds and strictly after the cursor's position."""
        if not self.since <= entry.at < self.until:
            return False
        return self.after is None or position_of(entry) < self.after


def _start_of(day: str) -> int:
    moment = datetime.strptime(day, "%Y-%m-%d").replace(tzinfo=UTC)
    return int(moment.timestamp() * 1000)


def window_of(query: AuditQuery, now_ms: int) -> AuditWindow:
    """The bounds of ``query`` at ``now_ms``: ``until`` defaults to now (exclusive), ``since``
    to :data:`DEFAULT_WINDOW_MS` before it.

    Raises:
        ValidationError: a limit outside 1..1000, ``since`` after ``until``, or a bad cursor.
    """
    if not 1 <= query.limit <= MAX_LIMIT:
        raise ValidationError(f"limit must be between 1 and {MAX_LIMIT}, got {query.limit}")
    until = query.until if query.until is not None else now_ms + 1
    since = query.since if query.since is not None else max(0, until - DEFAULT_WINDOW_MS)
    # No action was recorded before 1970: an earlier bound is 1970 itself.
    since, until = max(0, since), max(0, until)
    after = decode_cursor(query.cursor) if query.cursor is not None else None
    return AuditWindow(since=since, until=until, limit=query.limit, after=after)


def matches(entry: AuditEntry, query: AuditQuery) -> bool:
    """True when ``entry`` passes every filter of ``query`` (the time bounds aside)."""
    return (
        (query.environment is None or entry.environment == query.environment)
        and (query.kind is None or entry.kind == query.kind)
        and (query.workflow_id is None or entry.workflow_id == query.workflow_id)
        and (query.run_id is None or entry.run_id == query.run_id)
    )


def encode_cursor(position: AuditPosition) -> str:
    """The opaque cursor of a page that ended at ``position``."""
    text = json.dumps({"k": position.sort_key, "e": position.environment}, separators=(",", ":"))
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


def decode_cursor(cursor: str) -> AuditPosition:
    """The position a cursor holds; ValidationError when it is not one this log gave."""
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        fields = json.loads(base64.urlsafe_b64decode(padded.encode("ascii")))
    except (ValueError, UnicodeError, binascii.Error):
        fields = None
    if not isinstance(fields, dict):
        raise ValidationError("cursor is not one the audit log gave (pass nextCursor back)")
    key, environment = fields.get("k"), fields.get("e")
    if not isinstance(key, str) or not _SORT_KEY.fullmatch(key):
        raise ValidationError("cursor is not one the audit log gave (pass nextCursor back)")
    if not isinstance(environment, str) or not environment:
        raise ValidationError("cursor is not one the audit log gave (pass nextCursor back)")
    return AuditPosition(key, environment)
