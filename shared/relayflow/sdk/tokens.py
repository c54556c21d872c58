"""Tokens completed from outside, callbacks built on them, and polled conditions."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from relayflow import token_ids
from relayflow.errors import ConditionCheckError, TokenFailedError, WaitTimeoutError
from relayflow.protocol import StepJournalEntry, Waitpoint
from relayflow.sdk.durations import Duration, parse_duration, parse_optional_duration
from relayflow.sdk.failures import rehydrate_error, serialize_error
from relayflow.sdk.instructions import Call, Op
from relayflow.sdk.retry import RetryPolicy
from relayflow.sdk.scope import ContextCore, StepScope, ensure_not_in_step
from relayflow.sdk.serdes import Serdes, dump_value, load_value
from relayflow.sdk.steps import StepOptions, run_step
from relayflow.sdk.waits import check_on_timeout, resolved_value, timed_out

#: The key of a token's creation entry that holds its run-locating id (generated ids only).
RUN_TOKEN_ID_KEY = "runTokenId"


@dataclass(frozen=True)
class TokenSpec:
    """A created token: its ids, creation time (journalled), wait options and serdes.

    ``token_id`` is the id inside the run (the wait is ``token:<token_id>``, as in the
    reference); ``public_id`` is what the body hands out: the run-locating form for ids
    relayflow generated, the author's own id otherwise.
    """

    token_id: str
    public_id: str
    created_at: int
    timeout_ms: int | None
    heartbeat_timeout_ms: int | None
    on_timeout: str
    name: str | None
    serdes: Serdes | None = None


def token_url(run_id: str, spec: TokenSpec) -> str:
    """The callback path an external party uses to complete, fail or heartbeat a token."""
    if spec.public_id != spec.token_id:
        return f"/api/tokens/{spec.public_id}"
    return f"/api/runs/{run_id}/tokens/{spec.token_id}"


def create_token(
    core: ContextCore,
    *,
    token_id: str | None,
    name: str | None,
    timeout: Duration | None,
    heartbeat_timeout: Duration | None,
    on_timeout: str,
    serdes: Serdes | None = None,
) -> TokenSpec:
    """Create (or replay the creation of) a token; auto ids are ``tok_<n>`` within the run."""
    ensure_not_in_step("ctx.wait_for_token")
    check_on_timeout(on_timeout)
    timeout_ms = parse_optional_duration(timeout)
    heartbeat_ms = parse_optional_duration(heartbeat_timeout)
    inv = core.inv
    if token_id is None:
        token_id = f"{core.token_prefix()}{core.next_position()}"
        public_id = token_ids.run_token_id(inv.request.run_id, token_id)
    elif not isinstance(token_id, str) or not token_id or "/" in token_id:
        raise ValueError(f"invalid token id: {token_id!r}")
    elif token_ids.is_reserved(token_id):
        raise ValueError(
            f"invalid token id {token_id!r}: ids starting with {token_ids.PREFIX!r} are "
            "reserved for the ids relayflow generates"
        )
    else:
        public_id = token_id
    key = core.key(f"token:{token_id}")
    entry = core.reach(key, "token")
    if entry is None:
        inv.check_cancel()
        now = inv.now_ms()
        output: dict[str, Any] = {"tokenId": token_id, "createdAt": now}
        if public_id != token_id:
            output[RUN_TOKEN_ID_KEY] = public_id
        entry = StepJournalEntry(
            status="ok", kind="token", output=output, started_at=now, finished_at=now, name=name
        )
        inv.record(key, entry)
    created_at = int(entry.output["createdAt"])
    return TokenSpec(
        token_id, public_id, created_at, timeout_ms, heartbeat_ms, on_timeout, name, serdes
    )


def wait_token(core: ContextCore, spec: TokenSpec) -> Any:
    """Wait for a token: its payload (through the token's serdes), ``TokenFailedError``, or
    the timeout outcome."""
    ensure_not_in_step("token.wait()")
    inv = core.inv
    wait_id = f"token:{spec.token_id}"
    resolution = inv.resolution(wait_id)
    if resolution is not None:
        value = resolved_value(core, wait_id, resolution, spec.on_timeout)
        if resolution.error is not None and not resolution.timed_out:
            raise TokenFailedError(
                resolution.error.message or f"token {spec.token_id!r} was failed",
                code=resolution.error.code or TokenFailedError.code,
                data=resolution.error.data,
            )
        return value if timed_out(resolution) else load_value(value, spec.serdes)
    meta: dict[str, Any] = {
        "tokenId": spec.token_id,
        "onTimeout": spec.on_timeout,
        "createdAt": spec.created_at,
    }
    if spec.heartbeat_timeout_ms is not None:
        meta["heartbeatTimeoutMs"] = spec.heartbeat_timeout_ms
    if spec.name is not None:
        meta["name"] = spec.name
    remaining = None
    if spec.timeout_ms is not None:
        # Timeouts run from the token's creation, not from this (re-)registration.
        remaining = max(0, spec.created_at + spec.timeout_ms - inv.now_ms())
    inv.suspend_on(
        core.path,
        Waitpoint(client_waitpoint_id=wait_id, kind="MANUAL", meta=meta, timeout_ms=remaining),
    )


def callback_op(
    core: ContextCore,
    submit: Callable[[str], Any],
    *,
    name: str | None,
    timeout: Duration | None,
    heartbeat_timeout: Duration | None,
    retry: RetryPolicy | None,
    serdes: Serdes | None = None,
) -> Op[Any]:
    """``ctx.wait_for_callback``: token, ``submit(token_id)`` as a retried step, then wait.

    ``submit`` receives the run-locating token id; ``serdes`` loads the callback's payload.
    """
    spec = create_token(
        core,
        token_id=None,
        name=name,
        timeout=timeout,
        heartbeat_timeout=heartbeat_timeout,
        on_timeout="raise",
        serdes=serdes,
    )
    yield from run_step(
        core, f"callback:{spec.token_id}", submit, (spec.public_id,), StepOptions(retry=retry)
    )
    return wait_token(core, spec)


def _split_check(result: Any) -> tuple[bool, Any]:
    if not isinstance(result, tuple | list) or len(result) != 2:
        raise TypeError(f"a condition check must return (done, new_state), got {result!r}")
    return bool(result[0]), result[1]


def condition_op(
    core: ContextCore,
    check: Callable[[Any], Any],
    initial_state: Any,
    *,
    delay: Duration,
    max_attempts: int | None,
    backoff_rate: float,
    name: str | None,
    serdes: Serdes | None,
) -> Op[Any]:
    """``ctx.wait_for_condition``: poll ``check(state)``, checkpointing state between polls."""
    ensure_not_in_step("ctx.wait_for_condition")
    delay_ms = parse_duration(delay)
    if max_attempts is not None and max_attempts < 1:
        raise ValueError(f"invalid max_attempts: {max_attempts!r}")
    if backoff_rate <= 0:
        raise ValueError(f"invalid backoff_rate: {backoff_rate!r}")
    inv = core.inv
    label = name if name is not None else str(core.next_position())
    key = core.key(f"condition:{label}")
    entry = core.reach(key, "condition")
    if entry is not None:
        for update in entry.metadata_updates:
            inv.emit_metadata(update)
        if entry.status == "ok":
            core.advance_clock(entry.finished_at)
            return load_value(entry.output["state"], serdes)
        if entry.status == "err" and entry.error is not None:
            core.advance_clock(entry.finished_at)
            raise rehydrate_error(entry.error)
        state = load_value(entry.output["state"], serdes)
        polls = int(entry.output["polls"])
    else:
        state, polls = initial_state, 0
        entry = StepJournalEntry(
            status="retrying", kind="condition", started_at=inv.now_ms(), name=name
        )
    while True:
        if polls > 0:
            wait_id = f"condition:{core.key(label)}:{polls}"
            resolution = inv.resolution(wait_id)
            if resolution is None:
                wait_ms = int(delay_ms * backoff_rate ** (polls - 1))
                inv.suspend_on(
                    core.path,
                    Waitpoint(
                        client_waitpoint_id=wait_id,
                        kind="DATETIME",
                        meta={"durationMs": wait_ms},
                        timeout_ms=wait_ms,
                    ),
                )
            core.advance_clock(resolution.resolved_at)
        inv.begin_work()
        scope = StepScope(id_prefix=f"m:{key}:{polls + 1}:")
        try:
            done, new_state = _split_check((yield Call(check, (state,), None, scope, key)))
            dumped = dump_value(new_state, serdes)
        except Exception as exc:
            entry.metadata_updates = (*entry.metadata_updates, *scope.updates)
            check_error = ConditionCheckError(f"condition {label!r} check failed: {exc}")
            return _fail(core, key, entry, check_error, exc)
        entry.metadata_updates = (*entry.metadata_updates, *scope.updates)
        polls += 1
        state = load_value(dumped, serdes)
        entry.output = {"state": dumped, "polls": polls}
        if done:
            entry.status = "ok"
            entry.finished_at = inv.now_ms()
            inv.record(key, entry)
            core.advance_clock(entry.finished_at)
            return state
        if max_attempts is not None and polls >= max_attempts:
            exhausted = WaitTimeoutError(f"condition {label!r} not met after {polls} attempts")
            return _fail(core, key, entry, exhausted, None)
        inv.record(key, entry)


def _fail(
    core: ContextCore,
    key: str,
    entry: StepJournalEntry,
    failure: Exception,
    cause: BaseException | None,
) -> Any:
    failure.__cause__ = cause
    entry.status = "err"
    entry.error = serialize_error(failure)
    entry.finished_at = core.inv.now_ms()
    core.inv.record(key, entry)
    core.advance_clock(entry.finished_at)
    raise failure
