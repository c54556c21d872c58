"""Limits and timings of the orchestrator core, with their defaults."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CoreSettings:
    """Tunable limits of the run state machine and the engine.

    Attributes:
        operations_limit: Invocations, step attempts and wait resolutions a run may use
            before it fails with ``operations_limit_exceeded``.
        inbox_limit: Early injections buffered per run; more are refused.
        seen_ids_limit: Consumed injection ids remembered per run for deduplication.
        dispatch_max_attempts: Attempts of one invocation when the host is unreachable or
            answers 429/5xx, before the run fails with ``handler_error``.
        dispatch_backoff_initial_ms: Delay after the first transient dispatch failure.
        dispatch_backoff_max_ms: Cap of the exponential dispatch backoff.
        invocation_timeout_ms: Sets the request ``deadline`` (now + this).
        lease_ms: How long a driver owns a run without renewing its lease.
        inline_invocations: Invocations one drive call makes before handing the run off.
    """

    operations_limit: int = 100_000
    inbox_limit: int = 1_000
    seen_ids_limit: int = 1_000
    dispatch_max_attempts: int = 5
    dispatch_backoff_initial_ms: int = 1_000
    dispatch_backoff_max_ms: int = 60_000
    invocation_timeout_ms: int = 600_000
    lease_ms: int = 900_000
    inline_invocations: int = 1_000

    def dispatch_backoff_ms(self, failures: int) -> int:
        """The delay before the next attempt after ``failures`` transient failures (>= 1)."""
        delay = self.dispatch_backoff_initial_ms * (2 ** max(0, failures - 1))
        return int(min(delay, self.dispatch_backoff_max_ms))
