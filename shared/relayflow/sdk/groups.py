"""``ctx.group`` and compensations: checkpointed scopes, LIFO undo, each undo run once."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from relayflow.errors import SuspendSignal
from relayflow.protocol import CompensationReport, StepJournalEntry
from relayflow.sdk.failures import rehydrate_error, serialize_error
from relayflow.sdk.instructions import Body, Call, Op
from relayflow.sdk.invocation import Invocation
from relayflow.sdk.scope import Compensable, ContextCore, StepScope, ensure_not_in_step
from relayflow.sdk.serdes import Serdes, dump_value, load_value


def run_compensations(inv: Invocation, stack: list[Compensable]) -> Op[list[CompensationReport]]:
    """Run ``stack`` newest first; one failing does not stop the others.

    A compensation already in ``journal.compensationsRun`` is not run again: its stored report
    is returned instead. Every new report is journalled there.
    """
    reports: list[CompensationReport] = []
    for item in reversed(stack):
        stored = inv.journal.compensations_run.get(item.key)
        if stored is not None:
            reports.append(CompensationReport.model_validate(stored))
            continue
        if inv.options.journal_only:
            break  # a replay check runs no compensation the journal does not hold
        started = inv.now_ms()
        scope = StepScope(id_prefix=f"m:compensate:{item.key}:")
        try:
            yield Call(item.fn, (item.output,), None, scope, f"compensate:{item.key}")
        except Exception as exc:
            report = CompensationReport(
                step_id=item.key,
                status="err",
                error=serialize_error(exc),
                duration_ms=max(0, inv.now_ms() - started),
            )
        else:
            report = CompensationReport(
                step_id=item.key, status="ok", duration_ms=max(0, inv.now_ms() - started)
            )
        inv.journal.compensations_run[item.key] = report.to_wire()
        reports.append(report)
    stack.clear()
    return reports


def replay_scope(
    core: ContextCore, child: ContextCore, fn: Callable[..., Any], args: tuple[Any, ...]
) -> Op[None]:
    """Re-run a finished scope against the journal to re-register its compensations.

    Only scopes that finished with compensable steps are replayed; every operation inside
    them is journalled, so nothing runs twice. Reaching unjournalled work is non-determinism.
    """
    try:
        yield Body(fn, child, args)
    except (SuspendSignal, Exception) as exc:
        raise core.inv.nondeterministic(
            f"scope {child.path!r} was journalled as finished but replaying it did not finish "
            f"({type(exc).__name__})"
        ) from exc


def group_op(
    core: ContextCore, name: str, fn: Callable[..., Any], serdes: Serdes | None
) -> Op[Any]:
    """``ctx.group``: run ``fn(child_ctx)`` once; its outcome is checkpointed."""
    ensure_not_in_step("ctx.group")
    if not isinstance(name, str) or not name or "/" in name:
        raise ValueError(f"invalid group name: {name!r}")
    inv = core.inv
    key = core.key(f"group:{name}")
    child_path = core.key(name)
    entry = core.reach(key, "group")
    if entry is not None and entry.status in ("ok", "err"):
        if entry.status == "ok" and entry.compensables:
            replayed = core.child(child_path)
            yield from replay_scope(core, replayed, fn, ())
            core.adopt(replayed)
        else:
            inv.touch_prefix(child_path + "/")
        core.advance_clock(entry.finished_at)
        if entry.status == "ok":
            return load_value(entry.output, serdes)
        raise rehydrate_error(entry.error or serialize_error(RuntimeError("group failed")))
    child = core.child(child_path)
    started = inv.now_ms()
    try:
        result = yield Body(fn, child, ())
        dumped = dump_value(result, serdes)
    except Exception as exc:
        if inv.nondeterminism is not None:
            raise
        yield from run_compensations(inv, child.compensables)
        error = serialize_error(exc)
        finished = inv.now_ms()
        inv.record(
            key,
            StepJournalEntry(
                status="err",
                kind="group",
                error=error,
                started_at=started,
                finished_at=finished,
                name=name,
            ),
        )
        core.advance_clock(finished)
        raise rehydrate_error(error) from exc
    except BaseException:
        core.adopt(child)
        raise
    finished = inv.now_ms()
    inv.record(
        key,
        StepJournalEntry(
            status="ok",
            kind="group",
            output=dumped,
            started_at=started,
            finished_at=finished,
            compensables=[c.key for c in child.compensables],
            name=name,
        ),
    )
    core.adopt(child)
    core.advance_clock(finished)
    return load_value(dumped, serdes)
