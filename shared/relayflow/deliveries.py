"""Retry-safe deliveries: claims of delivery ids over a :class:`~relayflow.ports.DeliveryLog`.

A delivery id (an ``Idempotency-Key``, a signal or event id) is claimed with one conditional
write before the work it names is done, and the work's answer is stored on it afterwards:
a repeat with the same content gets that first answer back, a repeat with other content is
refused (``idempotency_key_reused``), and a repeat while the first is still under way is told
to retry (``request_in_progress``). An id claimed by a request that died before answering can
be claimed again once its hold passes; the work it names must then be safe to redo (a run id
derived from the key, a delivery deduplicated inside the run).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from relayflow._aliases import renamed
from relayflow.errors import IdempotencyKeyReusedError as IdempotencyKeyReusedError
from relayflow.errors import RequestInProgressError as RequestInProgressError
from relayflow.ports import Clock, DeliveryLog

DAY_MS = 86_400_000


def run_scope(run_id: str) -> str:
    """The scope of the delivery ids sent to one run (kept for the run's whole life)."""
    return f"run:{run_id}"


def fingerprint(*parts: Any) -> str:
    """A digest of ``parts`` (JSON values) in canonical form."""
    text = json.dumps(parts, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8", errors="surrogatepass")).hexdigest()


def delivery_key(kind: str, delivery_id: str) -> str:
    """The key of a delivery id chosen by the caller, in its run's scope."""
    return f"{kind}:{delivery_id}"


def delivery_fingerprint(kind: str, key: Any, payload: Any, outcome: str) -> str:
    """The content a delivery id stands for: a repeat with other content is refused."""
    return fingerprint(kind, key, payload, outcome)


@dataclass(frozen=True)
class Replay:
    """The first answer of a delivery id, given again."""

    answer: Mapping[str, Any]


@dataclass(frozen=True)
class DeliveryIdClaims:
    """Claims delivery ids in a log with one policy of holds and expiry.

    Attributes:
        log: Where ids are claimed.
        clock: Wall time (epoch ms).
        hold_ms: How long a claim is presumed under way before another request may take it.
        memory_ms: How long an id is remembered after its delivery (the run's life plus its
            retention, see ``Settings.delivery_memory_ms``).
    """

    log: DeliveryLog
    clock: Clock
    hold_ms: int
    memory_ms: int

    def begin(
        self,
        scope: str,
        key: str,
        digest: str,
        *,
        share_unanswered: bool = False,
        lifelong: bool = False,
    ) -> Replay | None:
        """Claim ``(scope, key)``; None when this caller goes ahead, else the first answer.

        ``share_unanswered``: an unanswered claim does not stop this caller (for work that
        deduplicates itself atomically, like a delivery into a run, so that a retry after
        a crash need not wait for the hold).
        ``lifelong``: the id is kept without expiry; the store stamps one when what it
        belongs to ends (a run's delivery ids, see ``run_scope``), instead of ``memory_ms``.

        Raises:
            IdempotencyKeyReusedError: The key was used with other content.
            RequestInProgressError: The first request with the key has not answered yet.
        """
        now = self.clock.now_ms()
        claim = self.log.claim(
            scope,
            key,
            digest,
            now_ms=now,
            hold_ms=self.hold_ms,
            expires_at=None if lifelong else now + self.memory_ms,
        )
        if claim.won:
            return None
        existing = claim.existing
        assert existing is not None
        if existing.fingerprint != digest:
            raise IdempotencyKeyReusedError(
                f"{key!r} was already used with a different request; use a new key"
            )
        if existing.answer is None:
            if share_unanswered:
                return None
            raise RequestInProgressError(
                f"the first request with {key!r} has not answered yet; retry shortly"
            )
        return Replay(existing.answer)

    def finish(
        self,
        scope: str,
        key: str,
        digest: str,
        answer: Mapping[str, Any],
        *,
        lifelong: bool = False,
    ) -> None:
        """Store the answer of a claimed id (``lifelong`` as it was claimed)."""
        self.log.record(scope, key, digest, answer, lifelong=lifelong)

    def abandon(self, scope: str, key: str, digest: str) -> None:
        """Give the claim up: the request failed, a retry may do the work."""
        self.log.release(scope, key, digest)

    def once(
        self, scope: str, key: str, digest: str, work: Callable[[], Mapping[str, Any]]
    ) -> tuple[Mapping[str, Any], bool]:
        """Do ``work`` once per ``(scope, key)``; returns its answer and whether it is a replay."""
        replay = self.begin(scope, key, digest)
        if replay is not None:
            return replay.answer, True
        try:
            answer = work()
        except BaseException:
            self.abandon(scope, key, digest)
            raise
        self.finish(scope, key, digest, answer)
        return answer, False


#: Names this module had before they were renamed (they warn, then resolve).
__getattr__ = renamed(__name__, {"Deliveries": ("relayflow.deliveries", "DeliveryIdClaims")})
