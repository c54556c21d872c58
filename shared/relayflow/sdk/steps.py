"""``ctx.step``: run-once semantics over the journal, retries, timeouts and at-most-once."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from relayflow.errors import StepInterruptedError, StepStillRunningError, SuspendSignal
from relayflow.flow.declarations import RateLimit
from relayflow.protocol import (
    MAX_INPUT_CHARS,
    AbandonedOutcome,
    MetadataUpdate,
    StepAttempt,
    StepJournalEntry,
    Waitpoint,
)
from relayflow.sdk.failures import serialize_error, step_failure
from relayflow.sdk.instructions import Call, Op, Pause
from relayflow.sdk.overruns import ABANDONED, OVERRUNS, Overrun, overrun_grace_ms
from relayflow.sdk.rate_limits import admit
from relayflow.sdk.retry import RetryPolicy
from relayflow.sdk.scope import Compensable, ContextCore, StepInfo, StepScope, ensure_not_in_step
from relayflow.sdk.serdes import Serdes, dump_converting, dump_output, load_value
from relayflow.sdk.tracebacks import keep_recent_stacks
from relayflow.tracing.ids import step_attempt_span

Semantics = Literal["at_least_once", "at_most_once"]


@dataclass(frozen=True)
class StepOptions:
    """The keyword options of ``ctx.step``."""

    retry: RetryPolicy | None = None
    timeout_ms: int | None = None
    compensate: Callable[..., Any] | None = None
    idempotency_key: str | None = None
    serdes: Serdes | None = None
    semantics: Semantics = "at_least_once"
    rate_limit: RateLimit | None = None


def _replay_metadata(core: ContextCore, entry: StepJournalEntry) -> None:
    for update in entry.metadata_updates:
        core.inv.emit_metadata(update)


def _finish(core: ContextCore, key: str, entry: StepJournalEntry, opts: StepOptions) -> Any:
    """Return a final entry's value (registering its compensation) or raise its failure."""
    core.advance_clock(entry.finished_at)
    if entry.status == "ok":
        value = load_value(entry.output, opts.serdes)
        if opts.compensate is not None:
            core.compensables.append(Compensable(key, opts.compensate, value))
        return value
    error = entry.error or serialize_error(RuntimeError("step failed"))
    raise step_failure(error, key)


def run_step(
    core: ContextCore,
    step_id: str,
    fn: Callable[..., Any],
    args: tuple[Any, ...],
    opts: StepOptions,
) -> Op[Any]:
    """The ``ctx.step`` operation (see ``WorkflowContext.step``)."""
    ensure_not_in_step("ctx.step")
    if not isinstance(step_id, str) or not step_id:
        raise ValueError(f"invalid step id: {step_id!r}")
    if opts.semantics not in ("at_least_once", "at_most_once"):
        raise ValueError(f"invalid semantics: {opts.semantics!r}")
    inv = core.inv
    key = core.key(step_id)
    entry = core.reach(key, "step")
    if entry is not None:
        _replay_metadata(core, entry)
        if entry.status in ("ok", "err"):
            return _finish(core, key, entry, opts)
    fn = _mocked(inv.options.step_mocks, key, step_id, fn)
    policy = opts.retry or core.retry_override
    overrides = inv.request.retry_overrides
    if overrides and key in overrides:
        policy = RetryPolicy.from_override(overrides[key], policy)
    attempt = 1
    refusals = 0
    if entry is not None and entry.status == "retrying":
        attempt = entry.attempt + 1
        refusals = entry.refused_starts or 0
        wait_id = _retry_wait_id(key, attempt, refusals)
        due = entry.next_attempt_at or 0
        if inv.resolution(wait_id) is None and inv.now_ms() < due:
            inv.suspend_on(core.path, _retry_wait(wait_id, key, attempt, due, due - inv.now_ms()))
    elif entry is not None and entry.status == "started":
        last = entry.attempts[-1] if entry.attempts else None
        attempt = last.attempt if last is not None else entry.attempt
        if last is None or not _may_run_now(last, inv):
            # The host died while this attempt ran: it is never run again.
            error = StepInterruptedError(f"step {key!r} attempt {attempt} was interrupted")
            outcome = _record_failure(core, key, entry, attempt, error, policy, opts)
            if outcome is None:
                raise step_failure(serialize_error(error), key)
            attempt, pause = outcome
            yield Pause(pause)
    if entry is None:
        entry = StepJournalEntry(status="started", kind="step", attempt=0, started_at=inv.now_ms())
    step_key = _idempotency_key(inv, key, opts)
    while True:
        if opts.rate_limit is not None:
            admit(core, key, attempt, opts.rate_limit)
        ready = opts.semantics == "at_most_once" and _durably_started(entry, attempt, inv)
        inv.begin_work(may_yield=not ready)
        if opts.timeout_ms is not None and ABANDONED.running(step_key):
            refusals += 1
            yield Pause(_hold(core, key, entry, attempt, policy, opts, refusals))
            continue
        refusals = 0
        entry.refused_starts = None
        if opts.semantics == "at_most_once" and not ready:
            now = inv.now_ms()
            entry.status = "started"
            entry.attempt = attempt
            entry.attempts.append(
                StepAttempt(
                    attempt=attempt,
                    status="started",
                    started_at=now,
                    invocation=inv.request.invocation_count,
                    logged=True if inv.per_step else None,
                )
            )
            try:
                # Durable here, before the attempt: a mark left unwritten must read as such.
                inv.record(key, entry, wait=True)
            except SuspendSignal:
                # The checkpoint could not be written: the mark is durable only with the
                # answer, whose next invocation runs the attempt.
                entry.attempts[-1].logged = None
                raise
            if not inv.per_step:
                # Without a checkpoint log the mark is durable once this invocation answers.
                inv.request_yield("at_most_once")
        started_at = inv.now_ms()
        info = StepInfo(key, attempt, step_key)
        scope = StepScope(
            id_prefix=f"m:{key}:{attempt}:",
            info=info,
            trace=step_attempt_span(inv.request.traceparent, inv.request.run_id, key, attempt),
        )
        try:
            overrun = _overrun_reporter(inv, key, attempt) if opts.timeout_ms else None
            value = yield Call(fn, args, opts.timeout_ms, scope, key, overrun)
            output = dump_output(f"step {key!r} returned a value", value, opts.serdes)
        except Exception as exc:
            _keep_metadata(entry, scope.updates)
            _drop_started(entry, attempt)
            failed = _attempt(attempt, "err", started_at, inv.now_ms(), exc)
            failed.input = failed_input(args)
            entry.attempts.append(failed)
            outcome = _record_failure(core, key, entry, attempt, exc, policy, opts)
            if outcome is None:
                raise step_failure(serialize_error(exc), key) from exc
            attempt, pause = outcome
            yield Pause(pause)
            continue
        finished_at = inv.now_ms()
        _keep_metadata(entry, scope.updates)
        _drop_started(entry, attempt)
        entry.attempts.append(_attempt(attempt, "ok", started_at, finished_at, None))
        entry.status = "ok"
        entry.output = output
        entry.error = None
        entry.attempt = attempt
        entry.finished_at = finished_at
        entry.next_attempt_at = None
        if entry.started_at == 0:
            entry.started_at = started_at
        # The compensation is registered first: a checkpoint that meets a cancel stops the
        # body, and this step's effect happened.
        value = _finish(core, key, entry, opts)
        inv.record(key, entry)
        return value


def _overrun_reporter(inv: Any, key: str, attempt: int) -> Callable[[bool], None]:
    """How attempt ``attempt`` of ``key`` tells, once its timed-out code ended, when and how."""
    run_id = inv.request.run_id

    def report(raised: bool) -> None:
        outcome: AbandonedOutcome = "raised" if raised else "returned"
        OVERRUNS.add(run_id, Overrun(key, attempt, inv.now_ms(), outcome))

    return report


def _mocked(
    mocks: Mapping[str, Any], key: str, step_id: str, fn: Callable[..., Any]
) -> Callable[..., Any]:
    """The step function, or its test double from ``ExecutorOptions.step_mocks``."""
    for name in (key, step_id):
        if name in mocks:
            return _as_callable(mocks[name])
    return fn


def _as_callable(double: Any) -> Callable[..., Any]:
    if callable(double):
        return double  # type: ignore[no-any-return]
    return lambda *args: double


def _may_run_now(last: StepAttempt, inv: Any) -> bool:
    """Whether a journalled "started" mark lets its attempt run in this invocation: only a
    mark the previous invocation answered with (and yielded for), never one made durable by
    a checkpoint, whose attempt ran in the invocation that wrote it."""
    return not last.logged and last.invocation == inv.request.invocation_count - 1


def _durably_started(entry: StepJournalEntry, attempt: int, inv: Any) -> bool:
    last = entry.attempts[-1] if entry.attempts else None
    return (
        entry.status == "started"
        and last is not None
        and last.attempt == attempt
        and last.status == "started"
        and _may_run_now(last, inv)
    )


def _drop_started(entry: StepJournalEntry, attempt: int) -> None:
    """The started marker of an at-most-once attempt is replaced by its outcome."""
    last = entry.attempts[-1] if entry.attempts else None
    if last is not None and last.attempt == attempt and last.status == "started":
        entry.attempts.pop()


def _keep_metadata(entry: StepJournalEntry, updates: list[MetadataUpdate]) -> None:
    entry.metadata_updates = (*entry.metadata_updates, *updates)


def _attempt(
    number: int, status: Any, started: int, finished: int, error: BaseException | None
) -> StepAttempt:
    return StepAttempt(
        attempt=number,
        status=status,
        started_at=started,
        finished_at=finished,
        error=serialize_error(error) if error is not None else None,
    )


def failed_input(args: tuple[Any, ...]) -> Any:
    """What a failed attempt keeps of its arguments: their JSON, or their ``repr`` when they
    are not JSON, cut at ``MAX_INPUT_CHARS`` (None without arguments)."""
    if not args:
        return None
    try:
        dumped = dump_converting(list(args))
        text = json.dumps(dumped, separators=(",", ":"))
    except (TypeError, ValueError):
        dumped = text = repr(args)
    if len(text) <= MAX_INPUT_CHARS:
        return dumped
    return text[:MAX_INPUT_CHARS] + f"… ({len(text):,} characters)"


def _idempotency_key(inv: Any, key: str, opts: StepOptions) -> str:
    """The step's idempotency key: it also names the step's abandoned code in ``ABANDONED``."""
    return opts.idempotency_key or f"{inv.request.run_id}:{key}"


def _retry_wait_id(key: str, attempt: int, refusals: int) -> str:
    """The wait before ``attempt``; a start refused ``refusals`` times waits under a new id."""
    return f"retry:{key}:{attempt}" + (f":held{refusals}" if refusals else "")


def _hold(
    core: ContextCore,
    key: str,
    entry: StepJournalEntry,
    attempt: int,
    policy: RetryPolicy | None,
    opts: StepOptions,
    refusals: int,
) -> int:
    """``attempt`` was not started: the code of an earlier attempt, given up at its timeout,
    still runs in this process. A refused start is not an attempt: it is tried again after
    the policy's next backoff, until the grace after that timeout has passed; then the step
    fails with ``STEP_STILL_RUNNING``. Returns the in-process pause; a longer wait suspends
    on a ``retry:`` wait journalled with the number of refusals.
    """
    inv = core.inv
    now = inv.now_ms()
    _drop_started(entry, attempt)
    # The grace runs from the deadline the abandoned code missed; when that code belongs to
    # another step or run sharing this step's idempotency key, from when this step began.
    timed_out = entry.attempts[-1] if entry.attempts else None
    given_up_at = timed_out.finished_at if timed_out is not None else None
    grace = overrun_grace_ms(opts.timeout_ms or 0, inv.options.overrun_grace_max_ms)
    grace_end = (entry.started_at if given_up_at is None else given_up_at) + grace
    entry.attempt = attempt - 1
    entry.status = "retrying"
    if now >= grace_end:
        error = StepStillRunningError(
            f"step {key!r}: code given up at its timeout (idempotency key "
            f"{_idempotency_key(inv, key, opts)!r}) was still running {grace} ms later; "
            f"attempt {attempt} was not started beside it"
        )
        entry.status = "err"
        entry.error = serialize_error(error)
        entry.finished_at = now
        entry.next_attempt_at = None
        entry.refused_starts = None
        inv.record(key, entry)
        core.advance_clock(now)
        raise step_failure(entry.error, key)
    backoff = (policy or RetryPolicy()).backoff_ms(
        attempt - 1 + refusals, jitter_key=f"{inv.request.run_id}:{key}"
    )
    delay = max(1, min(backoff, grace_end - now))
    if inv.can_wait_in_process(delay):
        return delay
    entry.next_attempt_at = now + delay
    entry.refused_starts = refusals
    inv.record(key, entry)
    wait_id = _retry_wait_id(key, attempt, refusals)
    inv.suspend_on(core.path, _retry_wait(wait_id, key, attempt, now + delay, delay))


def _retry_wait(wait_id: str, key: str, attempt: int, wake_at: int, delay: int) -> Waitpoint:
    return Waitpoint(
        client_waitpoint_id=wait_id,
        kind="DATETIME",
        meta={"wakeAt": wake_at, "stepId": key, "attempt": attempt},
        timeout_ms=max(0, delay),
    )


def _record_failure(
    core: ContextCore,
    key: str,
    entry: StepJournalEntry,
    attempt: int,
    error: BaseException,
    policy: RetryPolicy | None,
    opts: StepOptions,
) -> tuple[int, int] | None:
    """Journal a failed attempt; returns ``(next attempt, in-process pause)`` or ``None``.

    A delay too long to wait in process journals the entry as ``retrying`` and suspends on a
    ``retry:`` wait. ``None`` means the step failed for good (the entry is journalled ``err``).
    """
    inv = core.inv
    now = inv.now_ms()
    last = entry.attempts[-1] if entry.attempts else None
    if last is not None and last.attempt == attempt and last.status == "started":
        entry.attempts[-1] = _attempt(attempt, "err", last.started_at, now, error)
    keep_recent_stacks(entry.attempts)
    entry.attempt = attempt
    if entry.started_at == 0 and entry.attempts:
        entry.started_at = entry.attempts[0].started_at
    if policy is None or not policy.should_retry(error, attempt):
        entry.status = "err"
        entry.error = serialize_error(error)
        entry.finished_at = now
        entry.next_attempt_at = None
        inv.record(key, entry)
        core.advance_clock(now)
        return None
    delay = policy.delay_ms(attempt, error, now_ms=now, jitter_key=f"{inv.request.run_id}:{key}")
    if inv.can_wait_in_process(delay):
        entry.status = "retrying"
        entry.next_attempt_at = now + delay
        inv.record(key, entry)
        return attempt + 1, delay
    entry.status = "retrying"
    entry.error = serialize_error(error)
    entry.next_attempt_at = now + delay
    inv.record(key, entry)
    wait_id = f"retry:{key}:{attempt + 1}"
    inv.suspend_on(core.path, _retry_wait(wait_id, key, attempt + 1, now + delay, delay))
