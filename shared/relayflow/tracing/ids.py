"""A run's trace and span ids, derived from the run id, step and attempt (no OpenTelemetry).

Every process that touches a run (the trigger, each drive, each step host) computes the same
ids from what it already has, so a run's spans form one tree across every park and resume
without any id stored in its journal. A run that continues a caller's trace keeps the
caller's ``traceparent`` on its header (``RunRecord.trace_parent``): its trace id is the
caller's and its root span is a child of the caller's span.
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections.abc import Callable
from dataclasses import dataclass

_TRACEPARENT = re.compile(r"^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$")
_INVALID_TRACE_ID = "0" * 32
_INVALID_SPAN_ID = "0" * 16
SAMPLED = 0x01


@dataclass(frozen=True)
class SpanRef:
    """A span's place in a trace: W3C ids as integers, and whether the trace is sampled."""

    trace_id: int
    span_id: int
    sampled: bool = True

    @property
    def traceparent(self) -> str:
        """This span as a W3C ``traceparent`` header value."""
        flags = SAMPLED if self.sampled else 0
        return f"00-{self.trace_id:032x}-{self.span_id:016x}-{flags:02x}"


@functools.lru_cache(maxsize=1024)
def parse_traceparent(value: str | None) -> SpanRef | None:
    """The span a W3C ``traceparent`` value names; None for a missing or malformed one."""
    if not value:
        return None
    found = _TRACEPARENT.match(value.strip().lower())
    if found is None:
        return None
    trace_hex, span_hex, flags = found.groups()
    if trace_hex == _INVALID_TRACE_ID or span_hex == _INVALID_SPAN_ID:
        return None
    return SpanRef(int(trace_hex, 16), int(span_hex, 16), bool(int(flags, 16) & SAMPLED))


def _always(trace_id: int) -> bool:
    return True


#: Whether the configured sampler keeps a trace relayflow starts, from its id alone (so that
#: every process decides alike for every span of a run); set by relayflow.tracing.sdk.
_keeps_own_trace: list[Callable[[int], bool]] = [_always]


def sample_runs_with(keeps: Callable[[int], bool]) -> None:
    """Decide by ``keeps(trace_id)`` whether a run's own trace (one that continues no
    caller's) is sampled."""
    _keeps_own_trace[0] = keeps


def _digest(*parts: str, size: int) -> int:
    data = "\x1f".join(parts).encode("utf-8")
    value = int.from_bytes(hashlib.blake2b(data, digest_size=size).digest(), "big")
    return value or 1  # zero is the invalid id


@dataclass(frozen=True)
class RunTrace:
    """The ids of one run's spans.

    Attributes:
        run_id: The run.
        trace_id: The run's trace: the caller's when it continues one, else derived from
            the run id.
        caller: The caller's span the run's root span is a child of (None: the root span
            starts the trace).
    """

    run_id: str
    trace_id: int
    caller: SpanRef | None = None

    @classmethod
    def of(cls, run_id: str, trace_parent: str | None = None) -> RunTrace:
        """The trace of ``run_id``, continuing ``trace_parent`` (the run header's) if set."""
        caller = parse_traceparent(trace_parent)
        if caller is not None:
            return cls(run_id, caller.trace_id, caller)
        return cls(run_id, _digest("trace", run_id, size=16))

    @property
    def sampled(self) -> bool:
        """A continued trace keeps its caller's decision; relayflow's own are sampled by the
        configured sampler from the trace id (the same answer in every process)."""
        if self.caller is not None:
            return self.caller.sampled
        return _keeps_own_trace[0](self.trace_id)

    @property
    def trace_id_hex(self) -> str:
        return f"{self.trace_id:032x}"

    def span(self, *parts: str) -> SpanRef:
        """The span named by ``parts`` (e.g. ``("step", key, "2")``) in this run."""
        return SpanRef(self.trace_id, _digest(self.run_id, *parts, size=8), self.sampled)

    @property
    def root(self) -> SpanRef:
        """The run's span, from its start to its end."""
        return self.span("run")

    @property
    def trigger(self) -> SpanRef:
        return self.span("trigger")

    def invocation(self, number: int) -> SpanRef:
        """Invocation ``number`` (1-based, the record's ``invocation_count``) of the body."""
        return self.span("invocation", str(number))

    def step_attempt(self, step_key: str, attempt: int) -> SpanRef:
        """Attempt ``attempt`` (1-based) of the step journalled under ``step_key``."""
        return self.span("step", step_key, str(attempt))

    def wait(self, waitpoint_id: str) -> SpanRef:
        return self.span("wait", waitpoint_id)

    def child(self, child_run_id: str) -> SpanRef:
        """The span in this run covering its child run ``child_run_id``."""
        return self.span("child", child_run_id)


def step_attempt_span(
    invocation_traceparent: str | None, run_id: str, step_key: str, attempt: int
) -> SpanRef | None:
    """The span of a step attempt, in the trace of the invocation that runs it (its step
    request's ``traceparent``); None when the request carries none."""
    invocation = parse_traceparent(invocation_traceparent)
    if invocation is None:
        return None
    span_id = RunTrace(run_id, invocation.trace_id).step_attempt(step_key, attempt).span_id
    return SpanRef(invocation.trace_id, span_id, invocation.sampled)


#: Where a trace viewer link template takes the trace id: as is (32 hex digits), or in
#: AWS X-Ray's notation (``1-<8 hex>-<24 hex>``).
TRACE_ID_PLACEHOLDER = "{traceId}"
XRAY_TRACE_ID_PLACEHOLDER = "{xrayTraceId}"


def trace_url(template: str | None, trace_id: str | None) -> str | None:
    """The link to ``trace_id`` in the viewer ``template`` names (None without either)."""
    if not template or not trace_id:
        return None
    xray = f"1-{trace_id[:8]}-{trace_id[8:]}"
    return template.replace(TRACE_ID_PLACEHOLDER, trace_id).replace(XRAY_TRACE_ID_PLACEHOLDER, xray)
