"""Waits: sleeps, events, signals and child runs, with the reference's positional ids."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Literal

from relayflow.errors import (
    ChildRunError,
    HeartbeatTimeoutError,
    WaitTimeoutError,
    child_ended_message,
)
from relayflow.protocol import SerializedError, Waitpoint, WaitpointKind, WaitpointResolution
from relayflow.sdk.durations import Duration, parse_duration, parse_optional_duration
from relayflow.sdk.registry import Workflow
from relayflow.sdk.scope import ContextCore, ensure_not_in_step
from relayflow.sdk.serdes import Serdes, dump_output, dump_value, load_value

OnTimeout = Literal["null", "raise"]


def check_on_timeout(value: str) -> None:
    """``on_timeout`` is ``"null"`` (return ``None``) or ``"raise"`` (``WaitTimeoutError``)."""
    if value not in ("null", "raise"):
        raise ValueError(f"invalid on_timeout: {value!r} (expected 'null' or 'raise')")


def epoch_ms(when: datetime | int) -> int:
    """A datetime (naive means UTC) or epoch milliseconds, as epoch milliseconds."""
    if isinstance(when, bool):
        raise ValueError(f"invalid time: {when!r}")
    if isinstance(when, int):
        return when
    if isinstance(when, datetime):
        aware = when if when.tzinfo is not None else when.replace(tzinfo=UTC)
        return int(aware.timestamp() * 1000)
    raise ValueError(f"invalid time: {when!r}")


def timed_out(resolution: WaitpointResolution) -> bool:
    """Whether the orchestrator resolved the wait by its timeout (never a missing payload)."""
    return bool(resolution.timed_out) or resolution.source == "timeout"


def resolved_value(
    core: ContextCore, wait_id: str, resolution: WaitpointResolution, on_timeout: str
) -> Any:
    """The value a resolved wait returns, or the timeout error it raises."""
    core.advance_clock(resolution.resolved_at)
    error = resolution.error
    if error is not None and error.code == HeartbeatTimeoutError.code:
        raise HeartbeatTimeoutError(error.message or f"wait {wait_id!r} missed its heartbeat")
    if timed_out(resolution):
        if on_timeout == "raise":
            raise WaitTimeoutError(f"wait {wait_id!r} timed out", data={"waitId": wait_id})
        return None
    return resolution.payload


def positional_id(core: ContextCore, prefix: str) -> str:
    """Consume the context's next wait number and check it against the journal."""
    ensure_not_in_step("a ctx wait")
    number = core.next_position()
    wait_id = f"{prefix}{core.namespace}{number}"
    core.inv.check_position(core.namespace, number, wait_id)
    return wait_id


def _suspend(
    core: ContextCore,
    wait_id: str,
    kind: WaitpointKind,
    meta: dict[str, Any],
    timeout_ms: int | None,
) -> Any:
    core.inv.suspend_on(
        core.path,
        Waitpoint(client_waitpoint_id=wait_id, kind=kind, meta=meta, timeout_ms=timeout_ms),
    )


def sleep(core: ContextCore, duration: Duration) -> None:
    """``ctx.sleep``: a ``sleep:<n>`` wait whose wake time the orchestrator fixes once."""
    ms = parse_duration(duration)
    wait_id = positional_id(core, "sleep:")
    resolution = core.inv.resolution(wait_id)
    if resolution is not None:
        core.advance_clock(resolution.resolved_at)
        return
    _suspend(core, wait_id, "DATETIME", {"durationMs": ms}, ms)


def sleep_until(core: ContextCore, when: datetime | int) -> None:
    """``ctx.sleep_until``: a ``sleep:<n>`` wait with an absolute ``wakeAt``."""
    wake_at = epoch_ms(when)
    wait_id = positional_id(core, "sleep:")
    resolution = core.inv.resolution(wait_id)
    if resolution is not None:
        core.advance_clock(resolution.resolved_at)
        return
    delay = max(0, wake_at - core.inv.now_ms())
    _suspend(core, wait_id, "DATETIME", {"wakeAt": wake_at}, delay)


def wait_for_message(
    core: ContextCore,
    kind: Literal["EVENT", "SIGNAL"],
    key: str,
    *,
    match: Any,
    timeout: Duration | None,
    on_timeout: str,
    lookback: Duration | None,
    name: str | None,
) -> Any:
    """``ctx.wait_for_event`` / ``ctx.wait_for_signal``."""
    if not isinstance(key, str) or not key:
        raise ValueError(f"invalid {kind.lower()} name: {key!r}")
    check_on_timeout(on_timeout)
    timeout_ms = parse_optional_duration(timeout)
    lookback_ms = parse_optional_duration(lookback)
    prefix = "event" if kind == "EVENT" else "signal"
    wait_id = positional_id(core, f"{prefix}:{key}:")
    resolution = core.inv.resolution(wait_id)
    if resolution is not None:
        return resolved_value(core, wait_id, resolution, on_timeout)
    meta: dict[str, Any] = {"eventType" if kind == "EVENT" else "signalName": key}
    meta["onTimeout"] = on_timeout
    if match is not None:
        meta["match"] = dump_value(match, None)
    if lookback_ms is not None:
        meta["lookback"] = lookback_ms
    if name is not None:
        meta["name"] = name
    return _suspend(core, wait_id, kind, meta, timeout_ms)


def child_run_error(wire: SerializedError, child_workflow_id: str) -> ChildRunError:
    """The error ``ctx.invoke`` raises for a child that did not complete.

    The wire carries the child's own code and message, as the reference's does; the error
    keeps relayflow's ``CHILD_RUN_ENDED`` and a message naming the child run (from ``data``,
    when relayflow's orchestrator wrote it). A resolution journalled before the wire carried
    the child's code (``CHILD_RUN_ENDED``, the wrapped message, the child's error as its
    ``cause``) raises the same error as it did then.
    """
    data = wire.data if isinstance(wire.data, dict) else {}
    run_id, status = data.get("childRunId"), data.get("childStatus")
    if not isinstance(run_id, str) or not isinstance(status, str):
        return ChildRunError(
            wire.message or f"child run of {child_workflow_id!r} did not complete",
            data=wire.data,
            child_code=wire.code or ChildRunError.code,
            child_message=wire.message,
        )
    wrapped = f"child run {run_id} ended with status {status}"
    if wire.code == ChildRunError.code and wire.message.startswith(wrapped):
        child = wire.cause
        return ChildRunError(
            wire.message,
            data=wire.data,
            child_code=child.code if child is not None else ChildRunError.code,
            child_message=child.message if child is not None else child_ended_message(status),
        )
    own_message = wire.message not in ("", child_ended_message(status))
    return ChildRunError(
        f"{wrapped}: {wire.message}" if own_message else wrapped,
        data=wire.data,
        child_code=wire.code,
        child_message=wire.message,
    )


def invoke(
    core: ContextCore,
    target: Workflow[Any] | str,
    child_input: Any,
    *,
    detach: bool,
    idempotency_key: str | None,
    serdes: Serdes | None,
    tags: tuple[str, ...],
    lock_to_version: str | None = None,
) -> Any:
    """``ctx.invoke``: an ``invoke:<childWorkflowId>:<n>`` RUN wait."""
    child_id = target.id if isinstance(target, Workflow) else target
    if not isinstance(child_id, str) or not child_id:
        raise ValueError(f"invalid child workflow: {target!r}")
    wait_id = positional_id(core, f"invoke:{child_id}:")
    resolution = core.inv.resolution(wait_id)
    if resolution is not None:
        core.advance_clock(resolution.resolved_at)
        if resolution.error is not None:
            raise child_run_error(resolution.error, child_id)
        return None if detach else load_value(resolution.payload, serdes)
    meta: dict[str, Any] = {
        "childWorkflowId": child_id,
        "childInput": dump_output(
            f"the child run of {child_id!r} was given an input", child_input, serdes
        ),
        "detach": detach,
        "tags": list(tags),
    }
    if idempotency_key is not None:
        meta["idempotencyKey"] = idempotency_key
    if lock_to_version is not None:
        if not isinstance(lock_to_version, str) or not lock_to_version:
            raise ValueError(f"lock_to_version must be a non-empty string: {lock_to_version!r}")
        meta["lockToVersion"] = lock_to_version
    return _suspend(core, wait_id, "RUN", meta, None)
