"""Event ids: the caller's ``metadata.eventId``, or one derived from the event's content.

The derived id is ``evt_<name'>_<emittedAt'>_<first 12 hex of sha256(canonical(data))>`` so
re-deliveries of the same event get the same id (and so the same runs).
"""

from __future__ import annotations

import re
from typing import Any

from relayflow.events.canonical import sha256_hex
from relayflow.events.jsvalue import MISSING, js_to_string

_UNSAFE_NAME = re.compile(r"[^A-Za-z0-9._-]")
_UNSAFE_AT = re.compile(r"[^A-Za-z0-9.]")


def _sanitise(text: str, pattern: re.Pattern[str]) -> str:
    # One "_" per UTF-16 code unit, so an astral character becomes two.
    return pattern.sub(lambda m: "__" if ord(m.group()) > 0xFFFF else "_", text)


def derive_event_id(envelope: Any) -> str:
    """The content-derived event id of an envelope (always computed, whatever its metadata).

    In the name every UTF-16 code unit outside ``[A-Za-z0-9._-]`` becomes ``_``; in
    ``emittedAt`` every one outside ``[A-Za-z0-9.]``. Absent ``data`` hashes like ``null``.

    Args:
        envelope: ``{"name", "data"?, "metadata"?, "emittedAt"}``.

    Returns:
        ``evt_<name>_<emittedAt>_<hash12>``.
    """
    data = envelope.get("data", MISSING) if isinstance(envelope, dict) else MISSING
    name = envelope.get("name", MISSING) if isinstance(envelope, dict) else MISSING
    emitted_at = envelope.get("emittedAt", MISSING) if isinstance(envelope, dict) else MISSING
    safe_name = _sanitise(js_to_string(name), _UNSAFE_NAME)
    safe_at = _sanitise(js_to_string(emitted_at), _UNSAFE_AT)
    return f"evt_{safe_name}_{safe_at}_{sha256_hex(data)[:12]}"


def effective_event_id(envelope: Any) -> Any:
    """The id an ingested event is known by: ``metadata.eventId`` unless null or absent.

    The test is "nullish", not "falsy": ``""``, ``0``, ``False`` and objects are used as they
    are (and flow unchanged into the answer and the idempotency keys). Array metadata has no
    ``eventId``.

    Args:
        envelope: ``{"name", "data"?, "metadata"?, "emittedAt"}``.

    Returns:
        ``metadata.eventId`` (any JSON value but null), else :func:`derive_event_id`.
    """
    metadata = envelope.get("metadata") if isinstance(envelope, dict) else None
    if isinstance(metadata, dict):
        event_id = metadata.get("eventId")
        if event_id is not None and event_id is not MISSING:
            return event_id
    return derive_event_id(envelope)
