"""Checkpoint capabilities: what lets an HTTP step host write its run's checkpoint log.

An HTTP dispatcher offering per-step checkpoints hands its host, inside the signed step
request, a capability ``ckpt1.<run id, base64url>.<first slot>.<expiry, epoch ms>.<hex MAC>``.
The MAC is an HMAC-SHA256 with the dispatch signing secret over a message of its own
(``relayflow-checkpoint-v1``), so no step request signature can stand in for one. It allows
writing entries of that one run at slots from the first on, until the request's deadline;
the orchestrator's checkpoint route accepts nothing else with it.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from relayflow.clock import wall_s
from relayflow.errors import CapabilityForbiddenError as CapabilityForbiddenError
from relayflow.errors import SignatureError

if TYPE_CHECKING:
    from relayflow.config import Settings

PREFIX = "ckpt1"
CAPABILITY_HEADER = "x-relayflow-checkpoint-capability"
#: The longest a capability lives, whatever the request's deadline (a drive's 15 minutes).
MAX_LIFETIME_MS = 900_000
_CONTEXT = b"relayflow-checkpoint-v1"


@dataclass(frozen=True)
class Capability:
    """What a verified capability allows: entries of ``run_id`` from ``first_seq`` on, until
    ``expires_at`` (epoch ms)."""

    run_id: str
    first_seq: int
    expires_at: int

    def check(self, run_id: str, seq: int) -> None:
        """Raise :class:`CapabilityForbiddenError` unless it allows writing ``(run_id, seq)``."""
        if run_id != self.run_id:
            raise CapabilityForbiddenError("this checkpoint capability is for another run")
        if seq < self.first_seq:
            raise CapabilityForbiddenError(
                f"this checkpoint capability allows slots from {self.first_seq} on, not {seq}"
            )


@dataclass(frozen=True)
class CapabilitySigner:
    """Grants capabilities (dispatcher side) and verifies them (orchestrator route).

    Attributes:
        secret: The dispatch signing secret (signs and verifies).
        previous_secrets: Also accepted when verifying, for rotation.
        clock: Unix time in seconds (the wall clock by default).
    """

    secret: str
    previous_secrets: tuple[str, ...] = ()
    clock: Callable[[], float] = wall_s

    def grant(self, run_id: str, first_seq: int, deadline_ms: int) -> str:
        """A capability for ``run_id`` from ``first_seq`` on, expiring at the request's
        deadline (never more than :data:`MAX_LIFETIME_MS` from now)."""
        expires_at = min(int(deadline_ms), int(self.clock() * 1000) + MAX_LIFETIME_MS)
        run_part = base64.urlsafe_b64encode(run_id.encode("utf-8")).decode("ascii").rstrip("=")
        claims = f"{PREFIX}.{run_part}.{first_seq}.{expires_at}"
        return f"{claims}.{_mac(self.secret, claims)}"

    def verify(self, capability: str | None) -> Capability:
        """The capability's claims, if it is genuine and unexpired.

        Raises:
            SignatureError: It is missing, malformed, signed with no accepted secret, or its
                request deadline has passed.
        """
        if not capability:
            raise SignatureError(f"missing {CAPABILITY_HEADER} header")
        claims, _, given = capability.strip().rpartition(".")
        parts = claims.split(".")
        if len(parts) != 4 or parts[0] != PREFIX or not given:
            raise SignatureError("malformed checkpoint capability")
        expected = [_mac(secret, claims) for secret in (self.secret, *self.previous_secrets)]
        if not any(hmac.compare_digest(mac.encode(), given.encode()) for mac in expected):
            raise SignatureError("the checkpoint capability's signature does not match")
        _, run_part, seq_text, expires_text = parts
        try:
            run_id = base64.urlsafe_b64decode(run_part + "=" * (-len(run_part) % 4)).decode()
            first_seq, expires_at = int(seq_text), int(expires_text)
        except (binascii.Error, UnicodeDecodeError, ValueError):
            raise SignatureError("malformed checkpoint capability") from None
        now_ms = int(self.clock() * 1000)
        if now_ms > expires_at:
            raise SignatureError(
                f"the checkpoint capability expired {(now_ms - expires_at) // 1000} s ago, "
                "at its step request's deadline"
            )
        return Capability(run_id=run_id, first_seq=first_seq, expires_at=expires_at)


def _mac(secret: str, claims: str) -> str:
    message = _CONTEXT + b"\n" + claims.encode("ascii")
    return hmac.new(secret.encode("utf-8"), message, hashlib.sha256).hexdigest()


def capability_signer(settings: Settings) -> CapabilitySigner | None:
    """The signer of a deployment whose HTTP hosts checkpoint per step, else None."""
    if not settings.http_checkpoint_url or not settings.signing_secret:
        return None
    return CapabilitySigner(settings.signing_secret)
