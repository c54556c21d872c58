"""HMAC-SHA256 signing of step requests: relayflow's timestamped scheme and the reference's.

``relayflow`` mode: ``x-relayflow-signature: t=<unix seconds>,v1=<hex HMAC of "<t>.<body>">``,
accepted within a five-minute window. ``voyant`` mode (reference-compatible):
``x-voyant-dispatch-auth: <base64 HMAC of the body>``, no timestamp. Both sign the exact bytes
sent and compare in constant time. In both modes a step request whose (signed) ``deadline``
has passed is refused, so a captured request cannot be replayed after its deadline; in
``relayflow`` mode never more than five minutes after it was signed either. Within that
bound a step host refuses a copy of a request it already accepted (see
:mod:`relayflow.dispatch.replay`): :meth:`RequestSigner.verify` says until when it must
remember the signature.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from relayflow.clock import wall_s
from relayflow.errors import SignatureError as SignatureError
from relayflow.errors import ValidationError

RELAYFLOW_SIGNATURE_HEADER = "x-relayflow-signature"
VOYANT_SIGNATURE_HEADER = "x-voyant-dispatch-auth"
DEFAULT_TOLERANCE_S = 300

SigningMode = Literal["relayflow", "voyant"]

_HEX_DIGEST = re.compile(r"^[0-9a-f]{64}$")
#: Unix seconds as a signer writes them: ASCII digits without a leading zero.
_TIMESTAMP = re.compile(r"0|[1-9][0-9]{0,17}")


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
) -> Verified:
    """Check ``x-relayflow-signature`` against ``body``; any of ``secrets`` may have signed it.

    Returns:
        The signature that matched, usable until ``tolerance_s`` after it was signed.

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
            # Accepted while the whole seconds of age stay within the window.
            last_ms = (timestamp + tolerance_s + 1) * 1000 - 1
            return Verified(bytes.fromhex(expected.decode("ascii")), last_ms)
    raise SignatureError(f"{name} signature does not match request body")


def sign_voyant(body: bytes | str, secret: str) -> str:
    """The reference's ``x-voyant-dispatch-auth`` value: standard base64 of the body's HMAC."""
    mac = hmac.new(_secret_bytes(secret), _bytes(body), hashlib.sha256).digest()
    return base64.b64encode(mac).decode("ascii")


def verify_voyant(
    headers: Mapping[str, str], body: bytes | str, secrets: str | Sequence[str]
) -> Verified:
    """Check ``x-voyant-dispatch-auth`` against ``body`` with the reference's messages.

    Returns:
        The signature that matched; nothing in it expires (only the body's deadline does).

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
            return Verified(expected, NO_EXPIRY_MS)
    raise SignatureError(f"{name} signature does not match request body")


#: What a signature without a timestamp (``voyant`` mode) lasts by itself.
NO_EXPIRY_MS = 2**63 - 1


@dataclass(frozen=True)
class Verified:
    """A signature that verified: its MAC (what tells one signed request from another,
    whatever the header's spelling) and the last time (epoch ms) it is accepted."""

    mac: bytes
    valid_until_ms: int


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

    def verify(self, headers: Mapping[str, str], body: bytes | str) -> Verified:
        """Check that ``headers`` carry a valid signature of ``body`` and that the step
        request's ``deadline`` (when the body has one) has not passed.

        Returns:
            The signature, valid until the earlier of its window's end (``relayflow`` mode)
            and the request's deadline: a copy of the request is refused after that anyway,
            so a record of accepted signatures needs to keep it only until then.

        Raises:
            SignatureError: The signature is missing, malformed, stale or wrong, or the
                deadline has passed.
        """
        secrets = (self.secret, *self.previous_secrets)
        now = self.clock()
        if self.mode == "voyant":
            verified = verify_voyant(headers, body, secrets)
        else:
            verified = verify_relayflow(
                headers, body, secrets, now=int(now), tolerance_s=self.tolerance_s
            )
        deadline = check_deadline(body, now_ms=int(now * 1000))
        if deadline is not None and deadline < verified.valid_until_ms:
            return Verified(verified.mac, deadline)
        return verified


def check_deadline(body: bytes | str, *, now_ms: int) -> int | None:
    """Refuse a signed step request whose ``deadline`` (epoch ms) is before ``now_ms``.

    The deadline is inside the signed body, so it cannot be moved by whoever replays it.

    Returns:
        The deadline (rounded up to a whole ms), or None when the body has none.

    Raises:
        SignatureError: The deadline has passed.
    """
    try:
        parsed = json.loads(_bytes(body))
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None
    deadline = parsed.get("deadline") if isinstance(parsed, dict) else None
    if isinstance(deadline, bool) or not isinstance(deadline, int | float):
        return None
    if deadline < now_ms:
        raise SignatureError(
            f"the step request's deadline passed {(now_ms - int(deadline)) // 1000} s ago; "
            "a request is accepted only until its deadline"
        )
    return min(NO_EXPIRY_MS, math.ceil(deadline))


def _parse_relayflow(raw: str) -> tuple[int, list[bytes]]:
    """The timestamp and the ``v1`` candidates of a header: exactly one ``t=`` field, written
    as a signer writes it (no sign, no leading zero), so a header has one reading only."""
    timestamps: list[str] = []
    candidates: list[bytes] = []
    well_formed = True
    for part in raw.split(","):
        key, sep, value = part.strip().partition("=")
        if not sep:
            well_formed = False
        elif key == "t":
            timestamps.append(value)
        elif key == "v1" and _HEX_DIGEST.match(value):
            candidates.append(value.encode("ascii"))
    timestamp: int | None = None
    if well_formed and len(timestamps) == 1 and _TIMESTAMP.fullmatch(timestamps[0]):
        timestamp = int(timestamps[0])
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
