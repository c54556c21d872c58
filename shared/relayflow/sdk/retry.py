"""Retry policies for steps: which failures are retried, and after how long."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Literal

from relayflow.errors import FatalError, RetryableError
from relayflow.protocol import RetryOverride
from relayflow.sdk.determinism import generator_for
from relayflow.sdk.durations import Duration, parse_duration

Backoff = Literal["fixed", "linear", "exponential"]
Jitter = Literal["none", "full"]


@dataclass(frozen=True)
class RetryPolicy:
    """How a failed step attempt is retried.

    Attributes:
        max: Total attempts, first one included (clamped to at least 1).
        backoff: ``fixed`` (``initial``), ``linear`` (``initial * attempt``) or ``exponential``
            (``initial * backoff_rate ** (attempt - 1)``), where ``attempt`` is the 1-based
            attempt that just failed.
        initial: The base delay.
        max_delay: The delay never exceeds this (``RetryableError.retry_after`` excepted).
        backoff_rate: The multiplier of ``exponential`` backoff.
        jitter: ``none``, or ``full`` (a deterministic uniform draw in ``[0, delay]``).
        retry_on: When set, only failures of these types are retried.

    ``FatalError`` is never retried; ``RetryableError(retry_after=...)`` overrides the delay.
    """

    max: int = 3
    backoff: Backoff = "exponential"
    initial: Duration = 1_000
    max_delay: Duration = 60_000
    backoff_rate: float = 2.0
    jitter: Jitter = "none"
    retry_on: tuple[type[BaseException], ...] | None = field(default=None)

    def __post_init__(self) -> None:
        if self.backoff not in ("fixed", "linear", "exponential"):
            raise ValueError(f"invalid backoff: {self.backoff!r}")
        if self.jitter not in ("none", "full"):
            raise ValueError(f"invalid jitter: {self.jitter!r}")
        if self.backoff_rate <= 0:
            raise ValueError(f"invalid backoff_rate: {self.backoff_rate!r}")
        parse_duration(self.initial)
        parse_duration(self.max_delay)
        if self.retry_on is not None and not isinstance(self.retry_on, tuple):
            object.__setattr__(self, "retry_on", tuple(self.retry_on))

    @classmethod
    def from_override(cls, override: RetryOverride, coded: RetryPolicy | None) -> RetryPolicy:
        """The policy a redrive set for a step: its numbers, the coded policy's filters
        (``retry_on``, ``jitter``) kept."""
        return cls(
            max=override.max,
            backoff=override.backoff,
            initial=override.initial_ms,
            max_delay=override.max_delay_ms,
            backoff_rate=override.backoff_rate,
            jitter=coded.jitter if coded is not None else "none",
            retry_on=coded.retry_on if coded is not None else None,
        )

    @property
    def max_attempts(self) -> int:
        """Total attempts allowed (at least 1)."""
        return max(1, int(self.max))

    @property
    def initial_ms(self) -> int:
        """``initial`` in milliseconds."""
        return parse_duration(self.initial)

    @property
    def max_delay_ms(self) -> int:
        """``max_delay`` in milliseconds."""
        return parse_duration(self.max_delay)

    def should_retry(self, error: BaseException, attempt: int) -> bool:
        """Whether the failure of the 1-based ``attempt`` with ``error`` gets another attempt."""
        if isinstance(error, FatalError):
            return False
        if self.retry_on is not None and not isinstance(error, self.retry_on):
            return False
        return attempt < self.max_attempts

    def backoff_ms(self, attempt: int, *, jitter_key: str = "") -> int:
        """The policy delay after the 1-based ``attempt`` failed (no ``retry_after``)."""
        initial = self.initial_ms
        if self.backoff == "fixed":
            raw = float(initial)
        elif self.backoff == "linear":
            raw = float(initial * attempt)
        else:
            raw = initial * self.backoff_rate ** (attempt - 1)
        delay = int(min(raw, float(self.max_delay_ms)))
        if self.jitter == "full":
            delay = int(generator_for(f"{jitter_key}:{attempt}").next_float() * (delay + 1))
        return delay

    def delay_ms(
        self, attempt: int, error: BaseException, *, now_ms: int, jitter_key: str = ""
    ) -> int:
        """The delay before the next attempt; ``RetryableError.retry_after`` wins when set."""
        if isinstance(error, RetryableError) and error.retry_after is not None:
            return retry_after_ms(error.retry_after, now_ms=now_ms)
        return self.backoff_ms(attempt, jitter_key=jitter_key)


def retry_after_ms(value: object, *, now_ms: int) -> int:
    """A ``retry_after`` as a delay: a duration, or an absolute ``datetime`` (``date - now``)."""
    if isinstance(value, datetime):
        aware = value if value.tzinfo is not None else value.replace(tzinfo=UTC)
        return max(0, int(aware.timestamp() * 1000) - now_ms)
    if isinstance(value, float) and value >= 0:
        return int(value)
    if isinstance(value, timedelta | int | str):
        return parse_duration(value)
    raise ValueError(f"invalid retry_after: {value!r}")
