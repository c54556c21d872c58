"""HMAC-SHA256 signing of step requests: relayflow's timestamped scheme and the reference's.

``relayflow`` mode: ``x-relayflow-signature: t=<unix seconds>,v1=<hex HMAC of "<t>.<body>">``,
accepted within a five-minute window. ``voyant`` mode (reference-compatible):
``x-voyant-dispatch-auth: <base64 HMAC of the body>``, no timestamp. Both sign the exact bytes
sent and compare in constant time. In both modes a step request whose (signed) ``deadline``
has passed is refused, so a captured request cannot be replayed after its deadline; in
``relayflow`` mode never more than five minutes after it was signed either.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from relayflow.adapters.memory.clock import wall_s
from relayflow.errors import RelayflowError, ValidationError

RELAYFLOW_SIGNATURE_HEADER = "x-relayflow-signature"
VOYANT_SIGNATURE_HEADER = "x-voyant-dispatch-auth"
DEFAULT_TOLERANCE_S = 300

SigningMode = Literal["relayflow", "voyant"]

_HEX_DIGEST = re.compile(r"^[0-9a-f]{64}$")


class SignatureError(RelayflowError):
    """A step request's signature is missing, malformed, stale or wrong (HTTP 401)."""

    code = "unauthorized"


def header_value(headers: Mapping[str, str], name: str) -> str | None:
    """The value of header ``name`` (case-insensitive), or None when absent or empty."""
    lowered = name.lower()
    for key, value in headers.items():
        if key.lower() == lowered:
            return value.strip() or None
    return None


def sign_relayflow(body: bytes | str, secret: str, *, timestamp: int) -> str:
    """The ``x-relayflow-signature`` value for ``body`` signed at ``timestamp`` (unix seconds)."""
    return f"t={timestamp},v1={_hex_mac(_secret_bytes(secret), timestamp, _bytes(body))}"


def verify_relayflow(
    headers: Mapping[str, str],
    body: bytes | str,
    secrets: str | Sequence[str],
    *,
    now: int,
    tolerance_s: int = DEFAULT_TOLERANCE_S,
) -> None:
    """Check ``x-relayflow-signature`` against ``body``; any of ``secrets`` may have signed it.

    Raises:
        SignatureError: The header is missing, malformed, outside the window around ``now``
            (unix seconds), or matches none of the secrets.
    """
    name = RELAYFLOW_SIGNATURE_HEADER
    raw = header_value(headers, name)
    if raw is None:
        raise SignatureError(f"missing {name} header")
    timestamp, candidates = _parse_relayflow(raw)
    age = now - timestamp
    if abs(age) > tolerance_s:
        when = f"{age} s ago" if age >= 0 else f"{-age} s in the future"
        raise SignatureError(
            f"stale {name} header: signed {when}, outside the {tolerance_s} s window"
        )
    data = _bytes(body)
    for secret in _secret_list(secrets):
        expected = _hex_mac(_secret_bytes(secret), timestamp, data).encode("ascii")
        if any(hmac.compare_digest(expected, candidate) for candidate in candidates):
            return
    raise SignatureError(f"{name} signature does not match request body")


def sign_voyant(body: bytes | str, secret: str) -> str:
    """The reference's ``x-voyant-dispatch-auth`` value: standard base64 of the body's HMAC."""
    mac = hmac.new(_secret_bytes(secret), _bytes(body), hashlib.sha256).digest()
    return base64.b64encode(mac).decode("ascii")


def verify_voyant(
    headers: Mapping[str, str], body: bytes | str, secrets: str | Sequence[str]
) -> None:
    """Check ``x-voyant-dispatch-auth`` against ``body`` with the reference's messages.

    Raises:
        SignatureError: The header is missing, not base64, or matches none of the secrets.
    """
    name = VOYANT_SIGNATURE_HEADER
    raw = header_value(headers, name)
    if raw is None:
        raise SignatureError(f"missing {name} header")
    try:
        given = base64.b64decode(raw, validate=True)
    except (binascii.Error, ValueError):
        raise SignatureError(f"malformed {name} header (expected base64)") from None
    data = _bytes(body)
    for secret in _secret_list(secrets):
        expected = hmac.new(_secret_bytes(secret), data, hashlib.sha256).digest()
        if hmac.compare_digest(expected, given):
            return
    raise SignatureError(f"{name} signature does not match request body")


@dataclass(frozen=True)
class RequestSigner:
    """Signs outgoing step requests and verifies incoming ones in one mode.

    Attributes:
        secret: The shared secret used to sign (and accepted when verifying).
        mode: ``relayflow`` (timestamped, default) or ``voyant`` (reference-compatible).
        previous_secrets: Secrets still accepted when verifying, for rotation.
        tolerance_s: The relayflow mode's window, in seconds either side of now.
        clock: Unix time in seconds (the wall clock by default).
    """

    secret: str
    mode: SigningMode = "relayflow"
    previous_secrets: tuple[str, ...] = ()
    tolerance_s: int = DEFAULT_TOLERANCE_S
    clock: Callable[[], float] = wall_s

    def __post_init__(self) -> None:
        _secret_bytes(self.secret)
        if self.mode not in ("relayflow", "voyant"):
            raise ValidationError(f"signing mode must be relayflow or voyant, got {self.mode!r}")

    @property
    def header_name(self) -> str:
        """The header this signer writes and reads."""
        if self.mode == "voyant":
            return VOYANT_SIGNATURE_HEADER
        return RELAYFLOW_SIGNATURE_HEADER

    def headers(self, body: bytes | str) -> dict[str, str]:
        """The signature header(s) for exactly ``body``."""
        if self.mode == "voyant":
            return {VOYANT_SIGNATURE_HEADER: sign_voyant(body, self.secret)}
        return {
            RELAYFLOW_SIGNATURE_HEADER: sign_relayflow(
                body, self.secret, timestamp=int(self.clock())
            )
        }

    def verify(self, headers: Mapping[str, str], body: bytes | str) -> None:
        """Raise :class:`SignatureError` unless ``headers`` carry a valid signature of ``body``
        and the step request's ``deadline`` (when the body has one) has not passed."""
        secrets = (self.secret, *self.previous_secrets)
        now = self.clock()
        if self.mode == "voyant":
            verify_voyant(headers, body, secrets)
        else:
            verify_relayflow(headers, body, secrets, now=int(now), tolerance_s=self.tolerance_s)
        check_deadline(body, now_ms=int(now * 1000))


def check_deadline(body: bytes | str, *, now_ms: int) -> None:
    """Refuse a signed step request whose ``deadline`` (epoch ms) is before ``now_ms``.

    The deadline is inside the signed body, so it cannot be moved by whoever replays it.

    Raises:
        SignatureError: The deadline has passed.
    """
    try:
        parsed = json.loads(_bytes(body))
    except (ValueError, UnicodeDecodeError):
        return
    deadline = parsed.get("deadline") if isinstance(parsed, dict) else None
    if isinstance(deadline, bool) or not isinstance(deadline, int | float):
        return
    if deadline < now_ms:
        raise SignatureError(
            f"the step request's deadline passed {(now_ms - int(deadline)) // 1000} s ago; "
            "a request is accepted only until its deadline"
        )


def _parse_relayflow(raw: str) -> tuple[int, list[bytes]]:
    timestamp: int | None = None
    candidates: list[bytes] = []
    for part in raw.split(","):
        key, sep, value = part.strip().partition("=")
        if not sep:
            timestamp = None
            break
        if key == "t":
            timestamp = int(value) if value.isdigit() and value.isascii() else None
            if timestamp is None:
                break
        elif key == "v1" and _HEX_DIGEST.match(value):
            candidates.append(value.encode("ascii"))
    if timestamp is None or not candidates:
        raise SignatureError(
            f"malformed {RELAYFLOW_SIGNATURE_HEADER} header "
            "(expected t=<unix seconds>,v1=<hex HMAC-SHA256>)"
        )
    return timestamp, candidates


def _hex_mac(secret: bytes, timestamp: int, body: bytes) -> str:
    return hmac.new(
        secret, str(timestamp).encode("ascii") + b"." + body, hashlib.sha256
    ).hexdigest()


def _bytes(body: bytes | str) -> bytes:
    return body.encode("utf-8") if isinstance(body, str) else body


def _secret_bytes(secret: str) -> bytes:
    if not isinstance(secret, str) or not secret:
        raise ValidationError("the signing secret must be a non-empty string")
    return secret.encode("utf-8")


def _secret_list(secrets: str | Sequence[str]) -> list[str]:
    listed = [secrets] if isinstance(secrets, str) else list(secrets)
    if not listed:
        raise ValidationError("at least one signing secret is needed to verify")
    for secret in listed:
        _secret_bytes(secret)
    return listed
