"""Bodies of the single-run operator actions (pause, resume, redrive, rerun, upgrade) and the
views of what they leave on a run: its actions, pause, redrives and rerun links."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from relayflow.api.flow_options import WireDuration
from relayflow.api.model_bases import JsonInt, RequestModel, ResponseModel, no_default
from relayflow.protocol import RetryOverride
from relayflow.sdk.durations import parse_duration

#: The longest first delay or delay cap a redrive's retry policy may set (one day).
MAX_RETRY_DELAY_MS = 86_400_000
_REASON = Field(
    default=None, max_length=1024, description="why: kept on the run's action and in the audit log"
)


class RunActionRequest(RequestModel):
    """``POST /api/runs/{id}/pause`` and ``/resume``; an empty body acts without a reason."""

    reason: str | None = _REASON


class RetryOverrideBody(RequestModel):
    """A redrive's ``retry``: replaces the failed step's retry policy for this redrive."""

    max: JsonInt = Field(default=3, ge=1, le=1000, description="attempts, the first included")
    backoff: Literal["fixed", "linear", "exponential"] = "exponential"
    initial: WireDuration = Field(
        default=1_000, description="the delay before the second attempt (at most 1d)"
    )
    max_delay: WireDuration = Field(default=60_000, description="the longest delay (at most 1d)")
    backoff_rate: float = Field(default=2.0, ge=1.0, le=100.0)

    @model_validator(mode="after")
    def _delays_in_range(self) -> RetryOverrideBody:
        for name, value in (("initial", self.initial), ("maxDelay", self.max_delay)):
            if _milliseconds(value) > MAX_RETRY_DELAY_MS:
                raise ValueError(f"{name} must be at most 1d")
        return self

    def override(self) -> RetryOverride:
        """The policy as the engine and the step request carry it."""
        return RetryOverride(
            max=self.max,
            backoff=self.backoff,
            initial_ms=_milliseconds(self.initial),
            max_delay_ms=_milliseconds(self.max_delay),
            backoff_rate=self.backoff_rate,
        )


def _milliseconds(value: int | str) -> int:
    return value if isinstance(value, int) else parse_duration(value)


class RedriveRunRequest(RunActionRequest):
    """``POST /api/runs/{id}/redrive``; an empty body redrives with the steps' own policies."""

    retry: RetryOverrideBody | None = None


class RerunRunRequest(RequestModel):
    """``POST /api/runs/{id}/rerun``: a new run from a top-level step of an ended run."""

    from_step: str = Field(
        min_length=1,
        max_length=1024,
        description="the journal key of a top-level step of the run (a timeline entry with "
        "topLevel true)",
    )
    #: Leaving it out keeps the original's input; null is an input like any other.
    input: Any = Field(
        default=None,
        json_schema_extra=no_default,
        description="replaces the run's input (left out: the original's input)",
    )
    reason: str | None = _REASON

    @property
    def gives_input(self) -> bool:
        """Whether the body sets ``input`` (null included)."""
        return "input" in self.model_fields_set


class RunActionView(ResponseModel):
    """An operator action applied to the run."""

    id: str = Field(description="the action id: the request's Idempotency-Key, or a random id")
    kind: Literal["pause", "resume", "cancel", "redrive", "rerun", "upgrade"]
    by: str = Field(description="who asked: the API token's name, cli, or bulk:<job run id>")
    at: int = Field(description="epoch milliseconds")
    reason: str | None = None
    detail: dict[str, Any] = Field(
        default_factory=dict, description="what the action chose or made (fromStep, rerunId...)"
    )


class PauseView(ResponseModel):
    """Since when, by whom and why a paused run is paused."""

    at: int = Field(description="epoch milliseconds")
    by: str
    reason: str | None = None
    resume_to: Literal["running", "waiting", "start"] = Field(
        description="what resume makes of it: its status before the pause, or start for a run "
        "inserted paused"
    )


class RerunOriginView(ResponseModel):
    """The run a rerun copied its journal from, and the step it reran from."""

    run_id: str
    from_step: str


class RedriveView(ResponseModel):
    """One redrive of the run, with what it took out of the journal to run again."""

    at: int = Field(description="epoch milliseconds")
    action_id: str
    error: dict[str, Any] | None = Field(default=None, description="the run's error before it")
    steps: dict[str, list[dict[str, Any]]] = Field(
        default_factory=dict,
        description="the failed attempts it removed, by step key (the timeline shows them "
        "with redrive set)",
    )
    compensations: dict[str, Any] = Field(
        default_factory=dict, description="the failed compensation reports it removed, by step"
    )
