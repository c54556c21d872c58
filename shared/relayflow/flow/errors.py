"""The errors and codes of flow control: refused declarations, rate limits, ended runs."""

from __future__ import annotations

from typing import Any

from relayflow.errors import RelayflowError, ValidationError

#: Error code of a run that ``cancel-newest`` refused: the key's slots were all taken.
CONCURRENCY_LIMITED = "CONCURRENCY_LIMITED"
#: Error code of a run that ``cancel-in-progress`` cancelled to make room for a newer one.
CONCURRENCY_REPLACED = "CONCURRENCY_REPLACED"
#: Error code of a run that did not start within its ``ttl``.
TTL_EXPIRED = "TTL_EXPIRED"


class FlowControlError(ValidationError):
    """A flow-control declaration or trigger option that cannot be used (the message names
    the field and what to write instead)."""


class FlowKeyMissingError(FlowControlError):
    """A concurrency or debounce key path found no string or number in the run's input."""

    code = "concurrency_key_missing"


class RateLimitedError(RelayflowError):
    """A step with ``on_limit="fail"`` found its rate limit used up.

    Attributes:
        retry_after_ms: Milliseconds until a call with the same units could be admitted
            (also in ``data["retryAfterMs"]``, the reference's wire name).
    """

    code = "RATE_LIMITED"

    def __init__(self, message: str, *, retry_after_ms: int, data: Any = None) -> None:
        super().__init__(message, data={**(data or {}), "retryAfterMs": retry_after_ms})
        self.retry_after_ms = retry_after_ms


class RateLimiterMissingError(RelayflowError):
    """A step declares ``rate_limit`` but its host has no rate limiter to reserve from."""

    code = "RATE_LIMITER_MISSING"
