"""``Idempotency-Key`` on the API's writes: a repeated key answers the first answer again.

Every ``POST`` that starts or changes a run takes the header (the IETF draft's and Stripe's
convention). The key is claimed in the delivery log before the route runs; a 2xx answer is
stored on it, anything else gives the claim up so that a retry does the work. A repeat with
the same key and the same request (method, path, body) gets the stored status and body with
``Idempotent-Replayed: true``; the same key with another request answers 422
``idempotency_key_reused``; a repeat while the first is under way answers 409
``request_in_progress`` (retry). Event and signal ids in the body act as keys of their run.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

from relayflow.deliveries import Deliveries, Replay, fingerprint, run_scope

HEADER = "idempotency-key"
REPLAYED_HEADER = "Idempotent-Replayed"
MAX_KEY_LENGTH = 255
_KEY = re.compile(r"^[\x21-\x7e]{1,255}$")
#: Routes whose body id (``eventId``/``signalId``) keys the request when no header does.
_BODY_IDS = {"events": ("eventId", "EVENT"), "signals": ("signalId", "SIGNAL")}
_RUN_WRITE = re.compile(r"^/api/runs/(?P<run>[^/]+)/(?P<what>events|signals)$")


@dataclass(frozen=True)
class Claim:
    """A key this request holds until it answers."""

    scope: str
    key: str
    digest: str
    #: Kept without expiry until what it belongs to ends (a run's delivery ids).
    lifelong: bool = False


class KeyProblem(Exception):
    """The header is not a usable key (answered 400)."""


def header_key(headers: Mapping[str, Any]) -> str | None:
    """The request's ``Idempotency-Key`` (headers are lower-cased), checked.

    Raises:
        KeyProblem: The key is empty, too long or not printable ASCII.
    """
    raw = headers.get(HEADER)
    if raw is None:
        return None
    key = str(raw).strip()
    if not _KEY.match(key):
        raise KeyProblem(
            f"the Idempotency-Key header must be 1-{MAX_KEY_LENGTH} printable ASCII characters "
            "without spaces"
        )
    return key


def request_key(
    method: str, path: str, headers: Mapping[str, Any], body: Any, principal: str
) -> Claim | None:
    """What keys this request: its header, else the delivery id in its body, else nothing."""
    if method != "POST":
        return None
    digest = fingerprint(method, path, body)
    key = header_key(headers)
    if key is not None:
        return Claim(f"http:{principal}", key, digest)
    match = _RUN_WRITE.match(path)
    if match is None or not isinstance(body, dict):
        return None
    field, kind = _BODY_IDS[match.group("what")]
    given = body.get(field)
    if not isinstance(given, str) or not given:
        return None
    # Kept with the run's own delivery ids, for the run's whole life (see ``run_scope``).
    run_id = unquote(match.group("run"))
    return Claim(run_scope(run_id), f"http:{kind}:{given}", digest, lifelong=True)


def replayed(replay: Replay) -> tuple[int, str, str]:
    """The (status, content type, body) of a stored answer."""
    answer = replay.answer
    return (
        int(answer.get("status", 200)),
        str(answer.get("contentType") or "application/json"),
        str(answer.get("body") or ""),
    )


def stored_answer(answer: Mapping[str, Any]) -> dict[str, Any] | None:
    """What is kept of a resolver answer (2xx only), or None when the claim is given up."""
    status = answer.get("statusCode")
    if not isinstance(status, int) or not 200 <= status < 300 or answer.get("isBase64Encoded"):
        return None
    headers = answer.get("headers") or {}
    content_type = next(
        (v for k, v in headers.items() if str(k).lower() == "content-type"), "application/json"
    )
    return {"status": status, "contentType": content_type, "body": answer.get("body") or ""}


__all__ = [
    "HEADER",
    "REPLAYED_HEADER",
    "Claim",
    "Deliveries",
    "KeyProblem",
    "header_key",
    "replayed",
    "request_key",
    "stored_answer",
]
