"""Limits and timings of the orchestrator core, with their defaults."""

from __future__ import annotations

from dataclasses import dataclass

from relayflow.errors import ValidationError


@dataclass(frozen=True)
class CoreSettings:
    """Tunable limits of the run state machine and the engine.

    Attributes:
        operations_limit: Invocations, step attempts and wait resolutions a run may use
            before it fails with ``operations_limit_exceeded``.
        inbox_limit: Early injections buffered per run; more are refused.
        seen_ids_limit: Consumed injection ids also kept on the run: delivery ids are
            remembered for the run's life in the delivery log; these close the window
            between claiming an id there and delivering it.
        dispatch_max_attempts: Attempts of one invocation when the host is unreachable or
            answers 429/5xx, before the run fails with ``handler_error``.
        dispatch_backoff_initial_ms: Delay after the first transient dispatch failure.
        dispatch_backoff_max_ms: Cap of the exponential dispatch backoff.
        version_retry_max_ms: Cap of the delay between tries of a run waiting for the code
            version it is pinned to (see ``core.versions``).
        invocation_timeout_ms: Longest request ``deadline`` (now + this); a drive's budget
            shortens it.
        lease_ms: How long a holder's lease on a run lasts without renewal. While an
            invocation is in flight the holder renews it every third of this, up to
            ``lease_grace_ms`` after the drive's budget; a holder that died stops renewing,
            so its run is free again at most this long after the crash.
        lease_grace_ms: Time kept between a request's deadline and the latest end of its
            lease, for saving the answer (at most a quarter of ``lease_ms``).
        drive_budget_ms: How long one drive call may work when its caller set no budget
            (``Engine.budget``); then the run is handed off.
        min_invocation_ms: No invocation starts with less than this left of the budget.
        inline_invocations: Invocations one drive call makes before handing the run off.
        child_reconcile_ms: How often a run waiting on attached child runs checks them: each
            missing child is started and each ended one resumes the run. This recovers a
            child start or a parent resumption lost when a process died between two writes;
            a parent whose children are alive costs one check per period.
        require_per_step: Refuse per-invocation durability: step requests ask the host to
            checkpoint each step (a relayflow host that cannot answers ``failed`` at once),
            and a run whose host answers without per-step checkpoints fails with
            ``durability_unavailable``.
    """

    operations_limit: int = 100_000
    inbox_limit: int = 1_000
    seen_ids_limit: int = 100
    dispatch_max_attempts: int = 5
    dispatch_backoff_initial_ms: int = 1_000
    dispatch_backoff_max_ms: int = 60_000
    version_retry_max_ms: int = 900_000
    invocation_timeout_ms: int = 600_000
    lease_ms: int = 60_000
    lease_grace_ms: int = 5_000
    drive_budget_ms: int = 840_000
    min_invocation_ms: int = 1_000
    inline_invocations: int = 1_000
    child_reconcile_ms: int = 900_000
    require_per_step: bool = False

    def __post_init__(self) -> None:
        for name in ("lease_ms", "invocation_timeout_ms", "drive_budget_ms"):
            if getattr(self, name) <= 0:
                raise ValidationError(f"{name} must be positive, got {getattr(self, name)}")
        if self.child_reconcile_ms <= 0:
            # A zero period would keep a parent due forever: every check schedules the next
            # one at the same instant.
            raise ValidationError(
                f"child_reconcile_ms must be positive, got {self.child_reconcile_ms}"
            )

    def dispatch_backoff_ms(self, failures: int) -> int:
        """The delay before the next attempt after ``failures`` transient failures (>= 1)."""
        delay = self.dispatch_backoff_initial_ms * (2 ** max(0, failures - 1))
        return int(min(delay, self.dispatch_backoff_max_ms))

    def version_retry_ms(self, attempts: int) -> int:
        """The delay before a run waiting for its code version tries again (``attempts`` >= 1):
        the dispatch backoff, doubling up to ``version_retry_max_ms``."""
        delay = self.dispatch_backoff_initial_ms * (2 ** min(max(0, attempts - 1), 30))
        return int(min(delay, self.version_retry_max_ms))
