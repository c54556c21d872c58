"""``ctx.step(..., rate_limit=)``: reserve a slot of the step's rate limit before each attempt.

The reservation is made once per attempt (its id names the run, the step and the attempt, so
a re-run invocation answers the same slot). A slot in the future parks the run on a timed
wait, journalled like any other; ``on_limit="fail"`` raises ``RATE_LIMITED`` instead.
"""

from __future__ import annotations

from relayflow.flow.declarations import RateLimit
from relayflow.flow.errors import RateLimitedError, RateLimiterMissingError
from relayflow.flow.keys import resolve_key
from relayflow.flow.status import RATE_WAIT_PREFIX
from relayflow.protocol import Waitpoint
from relayflow.sdk.scope import ContextCore


def rate_wait_id(step_key: str, attempt: int) -> str:
    """The timed wait of attempt ``attempt`` of ``step_key`` for its rate-limit slot."""
    return f"{RATE_WAIT_PREFIX}{step_key}:{attempt}"


def admit(core: ContextCore, step_key: str, attempt: int, rate_limit: RateLimit) -> None:
    """Return when the attempt may run; suspend the run until its slot when it is later.

    Raises:
        RateLimiterMissingError: The host offers no rate limiter.
        RateLimitedError: ``on_limit="fail"`` and no slot is free now.
    """
    inv = core.inv
    wait_id = rate_wait_id(step_key, attempt)
    if inv.resolution(wait_id) is not None:
        return  # this attempt already waited for its slot
    inv.stop_if_journal_only()
    limiter = inv.options.rate_limiter
    if limiter is None:
        raise RateLimiterMissingError(
            f"step {step_key!r} declares a rate limit, but this host has no rate limiter"
        )
    key = (
        resolve_key(rate_limit.key, inv.request.input, what="rate limit key")
        if callable(rate_limit.key)
        else rate_limit.key
    )
    now = inv.now_ms()
    answer = limiter.reserve(
        key,
        f"{inv.request.run_id}:{wait_id}",
        limit=rate_limit.limit,
        window_ms=rate_limit.window_ms,
        units=rate_limit.units,
        on_limit=rate_limit.on_limit,
        now_ms=now,
    )
    if not answer.admitted:
        raise RateLimitedError(
            f"step {step_key!r}: rate limit {key!r} is used up; "
            f"retry in {answer.retry_after_ms} ms",
            retry_after_ms=answer.retry_after_ms,
        )
    if answer.at_ms > now:
        inv.suspend_on(
            core.path,
            Waitpoint(
                client_waitpoint_id=wait_id,
                kind="DATETIME",
                meta={"wakeAt": answer.at_ms, "stepId": step_key, "rateLimit": key},
                timeout_ms=answer.at_ms - now,
            ),
        )
