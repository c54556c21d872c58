"""Flow-control declarations under the reference's names: a workflow's ``concurrency``, a
step's ``rate_limit`` and a trigger's ``delay``, ``debounce``, ``ttl``, ``priority`` and
``concurrencyKey``.

Each is a frozen value checked when it is built. ``to_wire`` writes the reference's JSON
(camelCase) and ``from_wire`` reads it, so manifests and ``POST /api/runs`` carry the same
shapes as the SDK.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, get_args

from relayflow.flow.errors import FlowControlError
from relayflow.flow.keys import FlowKey, check_key, key_to_wire
from relayflow.sdk.durations import Duration, parse_duration

Strategy = Literal["queue", "cancel-in-progress", "cancel-newest", "round-robin"]
STRATEGIES: tuple[str, ...] = get_args(Strategy)
OnLimit = Literal["queue", "fail"]
ON_LIMITS: tuple[str, ...] = get_args(OnLimit)
DebounceMode = Literal["leading", "trailing"]
DEBOUNCE_MODES: tuple[str, ...] = get_args(DebounceMode)
#: Bounds of a trigger's ``priority`` (higher starts first; 0 when not given).
MIN_PRIORITY = -1000
MAX_PRIORITY = 1000
#: Longest ``concurrencyKey`` (and resolved key) accepted.
MAX_KEY_LENGTH = 256


def _duration_ms(value: object, what: str, *, positive: bool = True) -> int:
    try:
        ms = parse_duration(value, what=what)
    except ValueError as exc:
        raise FlowControlError(str(exc)) from None
    if positive and ms <= 0:
        raise FlowControlError(f"{what} must be longer than 0 ms, got {value!r}")
    return ms


def _count(value: object, what: str, *, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise FlowControlError(f"{what} must be an integer of at least {minimum}, got {value!r}")
    return value


def _choice(value: object, what: str, choices: tuple[str, ...]) -> Any:
    if value not in choices:
        raise FlowControlError(f"{what} must be one of {', '.join(choices)}, got {value!r}")
    return value


def _fields(wire: object, what: str, allowed: set[str], required: set[str]) -> Mapping[str, Any]:
    if not isinstance(wire, Mapping):
        raise FlowControlError(f"{what} must be an object, got {wire!r}")
    unknown = sorted(set(wire) - allowed)
    if unknown:
        raise FlowControlError(
            f"{what} has unknown field(s) {', '.join(unknown)}; "
            f"it takes {', '.join(sorted(allowed))}"
        )
    missing = sorted(required - set(wire))
    if missing:
        raise FlowControlError(f"{what} needs {', '.join(missing)}")
    return wire


@dataclass(frozen=True)
class Concurrency:
    """At most ``limit`` runs of the workflow with the same key hold a slot at once.

    Attributes:
        limit: Slots per key (``limit=1`` with a key: one run per key at a time).
        key: A path into the input or event (``"input.customerId"``), a function of the
            input (enforced only where the workflow runs in process), or None for one limit
            over the whole workflow.
        strategy: What a run finds when every slot is taken: ``queue`` (wait, status
            ``queued``), ``cancel-in-progress`` (cancel the oldest holder),
            ``cancel-newest`` (the new run ends cancelled) or ``round-robin``.
    """

    limit: int
    key: FlowKey | None = None
    strategy: Strategy = "queue"

    def __post_init__(self) -> None:
        _count(self.limit, "concurrency limit")
        check_key(self.key, "concurrency key", required=False)
        _choice(self.strategy, "concurrency strategy", STRATEGIES)

    def to_wire(self) -> dict[str, Any] | None:
        """The manifest's ``{key?, limit, strategy}``; None for a function key, which only an
        in-process host can evaluate."""
        if callable(self.key):
            return None
        wire: dict[str, Any] = {"limit": self.limit, "strategy": self.strategy}
        if self.key is not None:
            wire["key"] = key_to_wire(self.key)
        return wire

    @classmethod
    def from_wire(cls, wire: object) -> Concurrency:
        """Read the reference's ``{key?, limit, strategy?}``."""
        fields = _fields(wire, "concurrency", {"key", "limit", "strategy"}, {"limit"})
        return cls(
            limit=fields["limit"],
            key=fields.get("key"),
            strategy=fields.get("strategy", "queue"),
        )


def concurrency_errors(wire: object) -> list[str]:
    """Why a manifest's ``concurrency`` cannot be used (empty when it can)."""
    try:
        Concurrency.from_wire(wire)
    except FlowControlError as exc:
        return [exc.message]
    return []


@dataclass(frozen=True)
class RateLimit:
    """A limit shared by every run calling steps with the same key: ``limit`` units per
    ``window``.

    Attributes:
        key: The limiter's name (``"partner-api"``), or a function of the workflow input.
        limit: Units admitted per window (also the largest burst).
        window: The window, a duration (``"1m"``, ms or a timedelta).
        units: Units one call takes (at most ``limit``).
        on_limit: ``"queue"`` parks the run until its reserved slot; ``"fail"`` raises
            ``RateLimitedError`` (code ``RATE_LIMITED``) and reserves nothing.
    """

    key: str | Callable[[Any], Any]
    limit: int
    window: Duration
    units: int = 1
    on_limit: OnLimit = "queue"

    def __post_init__(self) -> None:
        if not callable(self.key) and (not isinstance(self.key, str) or not self.key):
            raise FlowControlError(
                f"rate limit key must be a non-empty string or a function, got {self.key!r}"
            )
        _count(self.limit, "rate limit")
        _count(self.units, "rate limit units")
        if self.units > self.limit:
            raise FlowControlError(
                f"rate limit units ({self.units}) exceed the limit ({self.limit}): "
                "such a call could never be admitted"
            )
        _duration_ms(self.window, "rate limit window")
        _choice(self.on_limit, "rate limit on_limit", ON_LIMITS)

    @property
    def window_ms(self) -> int:
        """The window in milliseconds."""
        return parse_duration(self.window)

    def to_wire(self) -> dict[str, Any]:
        """The reference's ``{key, limit, units, window, onLimit}`` (a function key is
        written as null)."""
        return {
            "key": None if callable(self.key) else self.key,
            "limit": self.limit,
            "units": self.units,
            "window": self.window_ms,
            "onLimit": self.on_limit,
        }


@dataclass(frozen=True)
class Debounce:
    """Fold a burst of triggers with the same key into one run.

    A burst goes on while each trigger comes less than ``delay`` after the one before.

    Attributes:
        key: A path into the input or event, or a function of the input (in process only).
        delay: The quiet time that ends a burst (a duration).
        mode: ``"trailing"`` starts one run ``delay`` after the burst's last trigger, with
            that trigger's input; ``"leading"`` starts on the first trigger.
        max_wait: Optional bound: the run starts at most this long after the burst's first
            trigger, however long the burst goes on.
    """

    key: FlowKey
    delay: Duration
    mode: DebounceMode = "trailing"
    max_wait: Duration | None = None

    def __post_init__(self) -> None:
        check_key(self.key, "debounce key", required=True)
        delay_ms = _duration_ms(self.delay, "debounce delay")
        _choice(self.mode, "debounce mode", DEBOUNCE_MODES)
        if self.max_wait is not None:
            max_wait_ms = _duration_ms(self.max_wait, "debounce maxWait")
            if max_wait_ms < delay_ms:
                raise FlowControlError(
                    f"debounce maxWait ({self.max_wait!r}) must not be shorter than its "
                    f"delay ({self.delay!r})"
                )

    @property
    def delay_ms(self) -> int:
        """The delay in milliseconds."""
        return parse_duration(self.delay)

    @property
    def max_wait_ms(self) -> int | None:
        """The maximum wait in milliseconds, if any."""
        return None if self.max_wait is None else parse_duration(self.max_wait)

    def to_wire(self) -> dict[str, Any]:
        """The reference's ``{key, delay, mode, maxWait?}`` (durations in ms)."""
        wire: dict[str, Any] = {
            "key": key_to_wire(self.key),
            "delay": self.delay_ms,
            "mode": self.mode,
        }
        if self.max_wait is not None:
            wire["maxWait"] = self.max_wait_ms
        return wire

    @classmethod
    def from_wire(cls, wire: object) -> Debounce:
        """Read ``{key, delay, mode?, maxWait?}``."""
        fields = _fields(wire, "debounce", {"key", "delay", "mode", "maxWait"}, {"key", "delay"})
        return cls(
            key=fields["key"],
            delay=fields["delay"],
            mode=fields.get("mode", "trailing"),
            max_wait=fields.get("maxWait"),
        )


@dataclass(frozen=True)
class TriggerOptions:
    """The flow-control options of one trigger.

    Attributes:
        delay: Start the run this long after the trigger (a duration) or at this instant (a
            datetime, naive meaning UTC); until then its status is ``delayed``.
        debounce: Fold this trigger into a burst (see :class:`Debounce`).
        ttl: A run not started within this duration of its trigger ends with ``TTL_EXPIRED``.
        priority: Queued runs with a higher priority start first (-1000 to 1000).
        concurrency_key: Replaces the key the workflow's ``concurrency.key`` computes.
    """

    delay: Duration | datetime | None = None
    debounce: Debounce | None = None
    ttl: Duration | None = None
    priority: int = 0
    concurrency_key: str | None = None

    def __post_init__(self) -> None:
        if self.delay is not None and not isinstance(self.delay, datetime):
            _duration_ms(self.delay, "delay", positive=False)
        if self.debounce is not None and not isinstance(self.debounce, Debounce):
            raise FlowControlError(
                f"debounce must be a Debounce(key=..., delay=...), got {self.debounce!r}"
            )
        if self.ttl is not None:
            _duration_ms(self.ttl, "ttl")
        if (
            isinstance(self.priority, bool)
            or not isinstance(self.priority, int)
            or not MIN_PRIORITY <= self.priority <= MAX_PRIORITY
        ):
            raise FlowControlError(
                f"priority must be an integer from {MIN_PRIORITY} to {MAX_PRIORITY}, "
                f"got {self.priority!r}"
            )
        if self.concurrency_key is not None and (
            not isinstance(self.concurrency_key, str)
            or not 0 < len(self.concurrency_key) <= MAX_KEY_LENGTH
        ):
            raise FlowControlError(
                f"concurrencyKey must be a string of 1 to {MAX_KEY_LENGTH} characters, "
                f"got {self.concurrency_key!r}"
            )

    def start_at_ms(self, now_ms: int) -> int:
        """When the run may start: ``now_ms`` plus the delay, or the delay's instant."""
        if self.delay is None:
            return now_ms
        if isinstance(self.delay, datetime):
            from relayflow.sdk.waits import epoch_ms  # the SDK imports this module

            return max(now_ms, epoch_ms(self.delay))
        return now_ms + parse_duration(self.delay)

    def ttl_ms(self) -> int | None:
        """The ttl in milliseconds (None: the run may wait forever)."""
        return None if self.ttl is None else parse_duration(self.ttl)

    def given(self) -> list[str]:
        """The wire names of the options this trigger sets (``priority`` only when not 0)."""
        names = {
            "delay": self.delay is not None,
            "debounce": self.debounce is not None,
            "ttl": self.ttl is not None,
            "priority": self.priority != 0,
            "concurrencyKey": self.concurrency_key is not None,
        }
        return [name for name, set_ in names.items() if set_]
