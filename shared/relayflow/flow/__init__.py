"""Flow control: concurrency per key, trigger options (delay, debounce, ttl, priority) and
step rate limits, declared with the reference runtime's names."""

from relayflow.flow.declarations import Concurrency, Debounce, RateLimit, TriggerOptions
from relayflow.flow.errors import (
    FlowControlError,
    FlowKeyMissingError,
    RateLimitedError,
    RateLimiterMissingError,
)

__all__ = [
    "Concurrency",
    "Debounce",
    "FlowControlError",
    "FlowKeyMissingError",
    "RateLimit",
    "RateLimitedError",
    "RateLimiterMissingError",
    "TriggerOptions",
]
