"""``ctx.parallel`` and ``ctx.map``: child contexts, completion policies and ``BatchResult``."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, Generic, Literal, TypeVar

from relayflow import batch_entries
from relayflow.errors import RelayflowError, SuspendSignal
from relayflow.protocol import SerializedError, StepJournalEntry
from relayflow.sdk.failures import rehydrate_error, serialize_error
from relayflow.sdk.groups import replay_scope, run_compensations
from relayflow.sdk.instructions import Batch, Body, Branch, Op, Settle
from relayflow.sdk.scope import ContextCore, ensure_not_in_step
from relayflow.sdk.serdes import Serdes, dump_value, load_value

T = TypeVar("T")
CompletionReason = Literal["ALL_COMPLETED", "MIN_SUCCESSFUL_REACHED", "FAILURE_TOLERANCE_EXCEEDED"]


@dataclass(frozen=True)
class CompletionPolicy:
    """When a batch stops starting branches.

    Tolerance is checked before ``min_successful``. The percentage is over all branches with a
    strict ``>``; branches never started count neither as successes nor as failures.

    Attributes:
        min_successful: Stop once this many branches succeeded.
        tolerated_failure_count: Stop once more than this many failed.
        tolerated_failure_percentage: Stop once failures exceed this percentage of all branches.
    """

    min_successful: int | None = None
    tolerated_failure_count: int | None = None
    tolerated_failure_percentage: float | None = None

    def __post_init__(self) -> None:
        if self.min_successful is not None and self.min_successful < 0:
            raise ValueError(f"invalid min_successful: {self.min_successful!r}")
        if self.tolerated_failure_count is not None and self.tolerated_failure_count < 0:
            raise ValueError(f"invalid tolerated_failure_count: {self.tolerated_failure_count!r}")
        pct = self.tolerated_failure_percentage
        if pct is not None and not 0 <= pct <= 100:
            raise ValueError(f"invalid tolerated_failure_percentage: {pct!r}")

    def decide(self, succeeded: int, failed: int, total: int) -> CompletionReason | None:
        """The reason the batch is complete, or ``None`` while it must go on."""
        if self.tolerated_failure_count is not None and failed > self.tolerated_failure_count:
            return "FAILURE_TOLERANCE_EXCEEDED"
        pct = self.tolerated_failure_percentage
        if pct is not None and total > 0 and failed * 100 / total > pct:
            return "FAILURE_TOLERANCE_EXCEEDED"
        if self.min_successful is not None and succeeded >= self.min_successful:
            return "MIN_SUCCESSFUL_REACHED"
        if succeeded + failed == total:
            return "ALL_COMPLETED"
        return None


@dataclass(frozen=True)
class BatchResult(Generic[T]):
    """The outcome of ``ctx.parallel`` / ``ctx.map``; branch failures never raise by themselves.

    Attributes:
        results: Per-branch results in input order (``None`` for failed or unfinished ones).
        errors: Per-branch errors in input order (``None`` for successful or unfinished ones).
        success_count: Branches that succeeded.
        failure_count: Branches that failed.
        started_count: Branches that started.
        completion_reason: ``ALL_COMPLETED``, ``MIN_SUCCESSFUL_REACHED`` or
            ``FAILURE_TOLERANCE_EXCEEDED``.
    """

    results: list[T | None]
    errors: list[RelayflowError | None]
    success_count: int
    failure_count: int
    started_count: int
    completion_reason: CompletionReason

    @property
    def has_failure(self) -> bool:
        """True when at least one branch failed."""
        return self.failure_count > 0

    def raise_if_error(self) -> None:
        """Raise the first branch error (in input order), if any."""
        for error in self.errors:
            if error is not None:
                raise error


@dataclass(frozen=True)
class _Ok:
    dumped: Any


@dataclass(frozen=True)
class _Err:
    error: SerializedError
    raised: RelayflowError


@dataclass(frozen=True)
class _Suspended:
    pass


Outcome = _Ok | _Err | _Suspended | None


class _Control:
    def __init__(self, policy: CompletionPolicy, outcomes: list[Outcome], started: list[bool]):
        self.policy = policy
        self.outcomes = outcomes
        self.started_flags = started

    def reason(self) -> CompletionReason | None:
        succeeded = sum(isinstance(o, _Ok) for o in self.outcomes)
        failed = sum(isinstance(o, _Err) for o in self.outcomes)
        return self.policy.decide(succeeded, failed, len(self.outcomes))

    def should_continue(self) -> bool:
        return self.reason() is None

    def started(self, index: int) -> None:
        self.started_flags[index] = True

    def finished(self, index: int, outcome: Any) -> None:
        self.outcomes[index] = outcome


@dataclass(frozen=True)
class BranchSpec:
    """One branch: its path segment, function and extra arguments after ``ctx``."""

    segment: str
    fn: Callable[..., Any]
    args: tuple[Any, ...] = ()


def _branch_op(
    child: ContextCore, key: str, spec: BranchSpec, serdes: Serdes | None
) -> Op[Outcome]:
    inv = child.inv
    started = inv.now_ms()
    try:
        value = yield Body(spec.fn, child, spec.args)
        dumped = dump_value(value, serdes)
    except SuspendSignal:
        return _Suspended()
    except Exception as exc:
        if inv.nondeterminism is not None:
            raise
        yield from run_compensations(inv, child.compensables)
        error = serialize_error(exc)
        inv.record(
            key,
            StepJournalEntry(
                status="err",
                kind="branch",
                error=error,
                started_at=started,
                finished_at=inv.now_ms(),
                name=spec.segment,
            ),
        )
        # Reported done only once durable (with the branch's last step, in the same write).
        yield Settle()
        raised = rehydrate_error(error)
        raised.__cause__ = exc
        return _Err(error, raised)
    inv.record(
        key,
        StepJournalEntry(
            status="ok",
            kind="branch",
            output=dumped,
            started_at=started,
            finished_at=inv.now_ms(),
            compensables=[c.key for c in child.compensables],
            name=spec.segment,
        ),
    )
    yield Settle()
    return _Ok(dumped)


def _from_checkpoint(
    output: Any,
    serdes: Serdes | None,
    result_serdes: Serdes | None,
    branches: Sequence[StepJournalEntry | None],
) -> BatchResult[Any]:
    if RESULT_KEY in output:
        if result_serdes is None:
            raise ValueError(
                "this batch result was checkpointed through result_serdes; pass it again"
            )
        loaded: BatchResult[Any] = load_value(output[RESULT_KEY], result_serdes)
        return loaded
    if batch_entries.OUTCOMES_KEY in output:
        dumped, wire_errors = batch_entries.counted(output[batch_entries.OUTCOMES_KEY], branches)
    else:
        # Recorded before batch entries referred to their branches: it holds copies.
        dumped, wire_errors = output["results"], output["errors"]
    results = [None if r is None else load_value(r, serdes) for r in dumped]
    errors: list[RelayflowError | None] = [
        None if e is None else rehydrate_error(SerializedError.model_validate(e))
        for e in wire_errors
    ]
    return BatchResult(
        results=[r if e is None else None for r, e in zip(results, errors, strict=True)],
        errors=errors,
        success_count=int(output["successCount"]),
        failure_count=int(output["failureCount"]),
        started_count=int(output["startedCount"]),
        completion_reason=output["completionReason"],
    )


def _outcome_codes(outcomes: Sequence[Outcome]) -> str:
    """One character per branch: how the batch counted it (see :mod:`relayflow.batch_entries`)."""
    return "".join(
        batch_entries.SUCCEEDED
        if isinstance(o, _Ok)
        else batch_entries.FAILED
        if isinstance(o, _Err)
        else batch_entries.NOT_COUNTED
        for o in outcomes
    )


#: The key of a batch checkpoint written through ``result_serdes`` (the whole result).
RESULT_KEY = "result"


def batch_op(
    core: ContextCore,
    tag: str,
    specs: Sequence[BranchSpec],
    *,
    max_concurrency: int | None,
    completion: CompletionPolicy | None,
    serdes: Serdes | None,
    result_serdes: Serdes | None = None,
) -> Op[BatchResult[Any]]:
    """Run branches in child contexts and checkpoint each outcome and the batch result.

    ``serdes`` dumps/loads each branch's value; ``result_serdes`` the whole
    :class:`BatchResult` (its ``loads`` returns one), on the first run as on replay: the
    body always gets ``loads(dumps(result))``.
    """
    ensure_not_in_step(f"ctx.{'parallel' if tag == 'p' else 'map'}")
    if max_concurrency is not None and (
        isinstance(max_concurrency, bool)
        or not isinstance(max_concurrency, int)
        or max_concurrency < 1
    ):
        raise ValueError(f"max_concurrency must be >= 1, got {max_concurrency!r}")
    segments = [s.segment for s in specs]
    for segment in segments:
        if not isinstance(segment, str) or not segment or "/" in segment:
            raise ValueError(f"invalid branch name: {segment!r}")
    if len(set(segments)) != len(segments):
        raise ValueError(f"branch names must be unique: {segments!r}")
    inv = core.inv
    policy = completion or CompletionPolicy()
    name = f"{tag}{core.next_batch()}"
    batch_key = core.key(f"batch:{name}")
    entry = core.reach(batch_key, "batch")
    children = [core.child(core.key(f"{name}.{s.segment}")) for s in specs]
    keys = [batch_entries.branch_key(batch_key, s.segment) for s in specs]
    inv.share_ordinal(batch_key, keys)
    if entry is not None and entry.status == "ok":
        for i, spec in enumerate(specs):
            branch = inv.journal.step_results.get(keys[i])
            if branch is not None and branch.status == "ok" and branch.compensables:
                yield from replay_scope(core, children[i], spec.fn, spec.args)
                core.adopt(children[i])
        inv.touch_prefix(core.key(f"{name}."))
        inv.touch_prefix(core.key(f"branch:{name}."))
        core.advance_clock(entry.finished_at)
        recorded = [inv.journal.step_results.get(key) for key in keys]
        return _from_checkpoint(entry.output, serdes, result_serdes, recorded)
    outcomes: list[Outcome] = [None] * len(specs)
    started = [False] * len(specs)
    todo: list[int] = []
    for i, spec in enumerate(specs):
        inv.claim(keys[i])
        branch = inv.entry(keys[i], "branch")
        if branch is None or branch.status not in ("ok", "err"):
            todo.append(i)
            continue
        started[i] = True
        inv.touch_prefix(children[i].path + "/")
        if branch.status == "err":
            error = branch.error or serialize_error(RuntimeError("branch failed"))
            outcomes[i] = _Err(error, rehydrate_error(error))
            continue
        outcomes[i] = _Ok(branch.output)
        if branch.compensables:
            yield from replay_scope(core, children[i], spec.fn, spec.args)
    control = _Control(policy, outcomes, started)
    if todo and control.should_continue():
        branches = [
            Branch(i, partial(_branch_op, children[i], keys[i], specs[i], serdes)) for i in todo
        ]
        try:
            yield Batch(branches, max_concurrency or len(specs), control)
        except BaseException:
            for child in children:
                core.adopt(child)
            raise
    reason = control.reason()
    if reason is None:
        for child in children:
            core.adopt(child)
        raise SuspendSignal(batch_key)
    for i, child in enumerate(children):
        if isinstance(outcomes[i], _Ok | _Err):
            core.adopt(child)
        else:
            # Abandoned (never started, in flight or suspended): its waits go too.
            child.compensables = []
            inv.drop_waits_under(child.path + "/")
    result = BatchResult(
        results=[load_value(o.dumped, serdes) if isinstance(o, _Ok) else None for o in outcomes],
        errors=[o.raised if isinstance(o, _Err) else None for o in outcomes],
        success_count=sum(isinstance(o, _Ok) for o in outcomes),
        failure_count=sum(isinstance(o, _Err) for o in outcomes),
        started_count=sum(started),
        completion_reason=reason,
    )
    finished = inv.now_ms()
    output: dict[str, Any]
    if result_serdes is not None:
        output = {RESULT_KEY: dump_value(result, result_serdes)}
    else:
        output = {
            batch_entries.OUTCOMES_KEY: _outcome_codes(outcomes),
            "successCount": result.success_count,
            "failureCount": result.failure_count,
            "startedCount": result.started_count,
            "completionReason": reason,
        }
        named = batch_entries.named_branches(segments)
        if named is not None:
            output[batch_entries.BRANCHES_KEY] = named
    inv.record(
        batch_key,
        StepJournalEntry(
            status="ok", kind="batch", started_at=finished, finished_at=finished, output=output
        ),
    )
    inv.touch_prefix(core.key(f"{name}."))
    inv.touch_prefix(core.key(f"branch:{name}."))
    core.advance_clock(finished)
    if result_serdes is not None:
        loaded: BatchResult[Any] = load_value(output[RESULT_KEY], result_serdes)
        return loaded
    return result
