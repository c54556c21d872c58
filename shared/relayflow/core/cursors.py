"""Listing cursors, the same for every run store: the position ``(startedAt, runId)`` of the
last run a page returned, written ``<startedAt>.<runId as UTF-8 hex>``.

Every string of :data:`RUN_CURSOR_PATTERN` is a position (the HTTP API's document gives that
pattern), so a cursor is refused only when it is not of that form: a position no run has is
still a place in the order, and the next page starts after it.
"""

from __future__ import annotations

import re

from relayflow.errors import ValidationError

#: A listing cursor: start time in epoch ms (the listing indexes' 15 digits), a dot, then the
#: run id's UTF-8 bytes in lower-case hex.
RUN_CURSOR_PATTERN = r"^[0-9]{1,15}\.(?:[0-9a-f]{2})*$"
_RUN_CURSOR = re.compile(RUN_CURSOR_PATTERN)


def encode_cursor(started_at: int, run_id: str) -> str:
    """The cursor pointing after the run ``(started_at, run_id)``."""
    return f"{started_at}.{run_id.encode('utf-8').hex()}"


def decode_cursor(cursor: str) -> tuple[int, str]:
    """The position a cursor points after; raises ``ValidationError`` if it is not one."""
    if not _RUN_CURSOR.fullmatch(cursor):
        raise ValidationError(f"invalid cursor: {cursor!r}")
    started_at, _, run_id = cursor.partition(".")
    # Bytes that are no UTF-8 name no run; the replacement character still gives a position.
    return int(started_at), bytes.fromhex(run_id).decode("utf-8", errors="replace")
