"""``Idempotency-Key`` on the API's writes: a repeated key answers the first answer again.

Every ``POST`` that starts or changes a run takes the header (the IETF draft's and Stripe's
convention). The key is claimed in the delivery log before the route runs; a 2xx answer is
stored on it, anything else gives the claim up so that a retry does the work. A repeat with
the same key and the same request (method, path, body) gets the stored status and body with
``Idempotent-Replayed: true``; the same key with another request answers 422
``idempotency_key_reused``; a repeat while the first is under way answers 409
``request_in_progress`` (retry). Event and signal ids in the body act as keys of their run:
the request's claim is the delivery id's own claim in the run (the driver is told it is held,
and the stored answer carries what a repeat through the driver needs), so a delivery costs one
claim.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

from aws_lambda_powertools import Logger
from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.utilities.data_classes import APIGatewayProxyEventV2

from relayflow._aliases import renamed
from relayflow.api.errors import ApiError
from relayflow.deliveries import (
    DeliveryIdClaims,
    Replay,
    delivery_fingerprint,
    delivery_key,
    fingerprint,
    run_scope,
)
from relayflow.errors import IdempotencyKeyReusedError, RelayflowError, RequestInProgressError

HEADER = "idempotency-key"
REPLAYED_HEADER = "Idempotent-Replayed"
MAX_KEY_LENGTH = 255
#: A key: printable ASCII without spaces (the OpenAPI document gives the header this pattern).
KEY_PATTERN = f"^[!-~]{{1,{MAX_KEY_LENGTH}}}$"
_KEY = re.compile(KEY_PATTERN)
#: Routes whose body id (``eventId``/``signalId``) keys the request when no header does:
#: (id field, delivery kind, field of the delivery's key).
_BODY_IDS = {"events": ("eventId", "EVENT", "eventType"), "signals": ("signalId", "SIGNAL", "name")}
_RUN_WRITE = re.compile(r"^/api/runs/(?P<run>[^/]+)/(?P<what>events|signals)$")


@dataclass(frozen=True)
class Claim:
    """A key this request holds until it answers."""

    scope: str
    key: str
    digest: str
    #: Kept without expiry until what it belongs to ends (a run's delivery ids).
    lifelong: bool = False
    #: The claim of the body's delivery id itself: the driver does not claim it again.
    delivery: bool = False
    #: Stored with the answer besides the HTTP answer (what the driver replays a repeat with).
    extra: dict[str, Any] = field(default_factory=dict, compare=False)


#: The claim the request being answered on this thread holds, if any.
_held: ContextVar[Claim | None] = ContextVar("relayflow_request_claim", default=None)


def hold(claim: Claim | None) -> None:
    """Record ``claim`` (None: nothing) as the current request's claim."""
    _held.set(claim)


def held() -> Claim | None:
    """The current request's claim."""
    return _held.get()


def held_delivery() -> Claim | None:
    """The current request's claim when it is the claim of the body's delivery id."""
    claim = _held.get()
    return claim if claim is not None and claim.delivery else None


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
    if not _KEY.fullmatch(key):
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
    id_field, kind, key_field = _BODY_IDS[match.group("what")]
    given = body.get(id_field)
    if not isinstance(given, str) or not given:
        return None
    # The driver's own claim of the id, for the run's whole life (see ``run_scope``): the
    # same record whether the delivery comes over HTTP or from the driver directly.
    run_id = unquote(match.group("run"))
    return Claim(
        run_scope(run_id),
        delivery_key(kind, given),
        # An event or a signal is delivered (the ``deliver`` outcome of its injection).
        delivery_fingerprint(kind, body.get(key_field), body.get("payload"), "deliver"),
        lifelong=True,
        delivery=True,
    )


def is_http_answer(replay: Replay) -> bool:
    """Whether ``replay`` holds an HTTP answer (a delivery made through the driver directly
    holds only the driver's)."""
    return isinstance(replay.answer.get("status"), int)


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


@dataclass(frozen=True)
class RequestClaims:
    """Claims the keys of the API's requests in ``deliveries`` and settles them on answering.

    A request claims its key before its route runs (:meth:`claim`); the resolver settles the
    claim with the answer it built (:meth:`settle`).
    """

    deliveries: DeliveryIdClaims | None
    logger: Logger

    def claim(self, event: APIGatewayProxyEventV2, principal: str | None) -> Replay | None:
        """Claim the request's key; the first answer when it was answered before.

        Raises:
            ApiError: The key is unusable (400), was used with another request (422), or its
                first request has not answered yet (409, retry).
        """
        method = event.http_method.upper()
        path = event.path
        if self.deliveries is None or method != "POST" or path.startswith("/api/manifests"):
            return None
        try:
            claim = request_key(
                method,
                path,
                event.headers,
                event.json_body if event.get("body") else None,
                principal or "-",
            )
        except KeyProblem as exc:
            raise ApiError(400, "invalid_idempotency_key", str(exc)) from None
        if claim is None:
            return None
        try:
            replay = self.deliveries.begin(
                claim.scope, claim.key, claim.digest, lifelong=claim.lifelong
            )
        except IdempotencyKeyReusedError as exc:
            raise ApiError(422, exc.code, exc.message) from None
        except RequestInProgressError as exc:
            raise ApiError(409, exc.code, exc.message, headers={"Retry-After": "1"}) from None
        if replay is not None and not is_http_answer(replay):
            # Delivered before by the driver directly: the driver answers the repeat.
            return None
        if replay is None:
            hold(claim)
        return replay

    def settle(self, answer: Mapping[str, Any]) -> None:
        """Store a 2xx answer on the request's key, or give the key up."""
        claim = held()
        hold(None)
        if claim is None or self.deliveries is None:
            return
        stored = stored_answer(answer)
        if stored is not None:
            stored.update(claim.extra)
        try:
            if stored is None:
                self.deliveries.abandon(claim.scope, claim.key, claim.digest)
            else:
                self.deliveries.finish(
                    claim.scope, claim.key, claim.digest, stored, lifelong=claim.lifelong
                )
        except RelayflowError:
            # The answer is already decided; an unrecorded key is claimable after its hold.
            self.logger.exception("the idempotency key could not be settled")


def replay_response(replay: Replay) -> Response[str]:
    """The stored answer, sent again and marked as a replay."""
    status, content_type, body = replayed(replay)
    return Response(
        status_code=status,
        content_type=content_type,
        body=body,
        headers={REPLAYED_HEADER: "true"},
    )


__all__ = [
    "HEADER",
    "KEY_PATTERN",
    "REPLAYED_HEADER",
    "Claim",
    "DeliveryIdClaims",
    "KeyProblem",
    "RequestClaims",
    "header_key",
    "held",
    "held_delivery",
    "hold",
    "is_http_answer",
    "replay_response",
    "replayed",
    "request_key",
    "stored_answer",
]

#: Names this module had before they were renamed (they warn, then resolve).
__getattr__ = renamed(__name__, {"Deliveries": ("relayflow.deliveries", "DeliveryIdClaims")})
