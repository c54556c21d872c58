"""Opaque listing cursors, the same for every run store: the position ``(startedAt, runId)``
of the last run a page returned."""

from __future__ import annotations

import base64
import json

from relayflow.errors import ValidationError


def encode_cursor(started_at: int, run_id: str) -> str:
    """An opaque cursor pointing after the run ``(started_at, run_id)``."""
    raw = json.dumps([started_at, run_id], separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[int, str]:
    """The position a cursor points after; raises ``ValidationError`` if it is not one."""
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        started_at, run_id = json.loads(base64.urlsafe_b64decode(padded.encode()))
        return int(started_at), str(run_id)
    except (ValueError, TypeError) as exc:
        raise ValidationError(f"invalid cursor: {cursor!r}") from exc
