"""Errors to ``SerializedError`` and back: what the journal keeps and what a replay raises."""

from __future__ import annotations

from typing import Any

from relayflow import errors
from relayflow.errors import (
    RUNTIME_ERROR,
    USER_ERROR,
    RelayflowError,
    RetryableError,
    StepFailedError,
    StepInterruptedError,
)
from relayflow.protocol import SerializedError
from relayflow.sdk.serdes import dump_converting

_MAX_CAUSE_DEPTH = 5

# Errors a replay re-raises with their own class (by ``name``); any other name becomes
# a StepFailedError so that live runs and replays raise the same type.
_REHYDRATABLE: dict[str, type[RelayflowError]] = {
    cls.__name__: cls
    for cls in (
        errors.FatalError,
        errors.RetryableError,
        errors.StepTimeoutError,
        errors.StepInterruptedError,
        errors.StepStillRunningError,
        errors.StepFailedError,
        errors.NotJsonError,
        errors.WaitTimeoutError,
        errors.HeartbeatTimeoutError,
        errors.TokenFailedError,
        errors.ChildRunError,
        errors.ConditionCheckError,
        errors.ServiceNotFoundError,
        errors.NonDeterminismError,
    )
}


def _json_or_text(value: Any) -> Any:
    try:
        return dump_converting(value)
    except TypeError:
        return repr(value)


def serialize_error(error: BaseException, *, depth: int = 0) -> SerializedError:
    """The wire form ``{category, code, message, name, data, cause}`` of ``error``."""
    if isinstance(error, RelayflowError):
        category = error.category if error.category in (USER_ERROR, RUNTIME_ERROR) else USER_ERROR
        code = error.code
        message = error.message or str(error)
        data = _json_or_text(error.data) if error.data is not None else None
        if isinstance(error, RetryableError) and error.retry_after is not None:
            extra = {"retryAfter": _json_or_text(error.retry_after)}
            data = {**data, **extra} if isinstance(data, dict) else data or extra
    else:
        category = USER_ERROR
        raw_code = getattr(error, "code", None)
        code = raw_code if isinstance(raw_code, str) and raw_code else "UNKNOWN"
        message = str(error)
        data = None
    cause: SerializedError | None = None
    original = error.__cause__
    if original is not None and depth < _MAX_CAUSE_DEPTH:
        cause = serialize_error(original, depth=depth + 1)
    return SerializedError(
        category=category,
        code=code,
        message=message,
        name=type(error).__name__,
        data=data,
        cause=cause,
    )


def step_failure(error: SerializedError, step_id: str) -> RelayflowError:
    """The error a body sees for a step that failed for good (journalled or live)."""
    if error.code == StepInterruptedError.code:
        interrupted = StepInterruptedError(error.message, data=error.data)
        interrupted.step_id = step_id
        return interrupted
    return StepFailedError(
        error.message, code=error.code, data=error.data, step_id=step_id, error_name=error.name
    )


def rehydrate_error(error: SerializedError) -> RelayflowError:
    """A relayflow error standing for a journalled failure (same class when it is one of ours)."""
    cls = _REHYDRATABLE.get(error.name or "")
    if cls is None or cls is StepFailedError:
        return StepFailedError(
            error.message, code=error.code, data=error.data, error_name=error.name
        )
    if cls is RetryableError:
        return RetryableError(error.message, code=error.code, data=error.data)
    return cls(error.message, code=error.code, data=error.data)
