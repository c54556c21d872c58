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
from relayflow.sdk.tracebacks import recorded_traceback

_MAX_CAUSE_DEPTH = 5
#: The attribute a step failure raised in the body keeps its journalled error in: the run's
#: error then names what the step raised (``KeyError``) with its traceback, live or replayed.
_JOURNALLED = "_relayflow_journalled_error"

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
    """The wire form ``{category, code, message, name, stack, data, cause}`` of ``error``.

    ``stack`` is the user's part of the traceback (see :mod:`relayflow.sdk.tracebacks`),
    covering the causes too, which carry none of their own; a step failure raised in the body
    carries the traceback journalled with the step (itself, or as a direct cause).
    """
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
    journalled = _journalled(error)
    if journalled is not None:
        stack = journalled.stack if depth <= 1 else None
    else:
        stack = recorded_traceback(error) if depth == 0 else None
    return SerializedError(
        category=category,
        code=code,
        message=message,
        name=type(error).__name__,
        stack=stack,
        data=data,
        cause=cause,
    )


def run_error(error: BaseException) -> SerializedError:
    """The error a run fails with when its body raises ``error``: a step failure the body let
    through is the step's journalled error (``KeyError`` and its traceback, whether the step
    failed in this invocation or an earlier one)."""
    journalled = _journalled(error)
    if journalled is not None:
        return journalled.model_copy(deep=True)
    return serialize_error(error)


def _journalled(error: BaseException) -> SerializedError | None:
    journalled = getattr(error, _JOURNALLED, None)
    return journalled if isinstance(journalled, SerializedError) else None


def _with_journalled(failure: RelayflowError, error: SerializedError) -> RelayflowError:
    setattr(failure, _JOURNALLED, error)
    return failure


def step_failure(error: SerializedError, step_id: str) -> RelayflowError:
    """The error a body sees for a step that failed for good (journalled or live)."""
    if error.code == StepInterruptedError.code:
        interrupted = StepInterruptedError(error.message, data=error.data)
        interrupted.step_id = step_id
        return _with_journalled(interrupted, error)
    failed = StepFailedError(
        error.message, code=error.code, data=error.data, step_id=step_id, error_name=error.name
    )
    return _with_journalled(failed, error)


def rehydrate_error(error: SerializedError) -> RelayflowError:
    """A relayflow error standing for a journalled failure (same class when it is one of ours)."""
    cls = _REHYDRATABLE.get(error.name or "")
    if cls is None or cls is StepFailedError:
        failed = StepFailedError(
            error.message, code=error.code, data=error.data, error_name=error.name
        )
        return _with_journalled(failed, error)
    if cls is RetryableError:
        return RetryableError(error.message, code=error.code, data=error.data)
    return cls(error.message, code=error.code, data=error.data)
