"""One invocation of a run's step host: begin it on the draft, dispatch the request under a
renewed lease, and settle the host's answer (beginning the next one in the same save)."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, NamedTuple

from pydantic import ValidationError

from relayflow.core.checkpoints import UNAVAILABLE_REASON, ended_unavailable, fence_entry, fold
from relayflow.core.effects import Effect
from relayflow.core.interventions import on_alarm
from relayflow.core.outcome import working_copy
from relayflow.core.record import Lease, RunRecord
from relayflow.core.transitions import (
    SentInvocation,
    apply_response,
    begin_invocation,
    build_request,
    dispatch_failed,
)
from relayflow.costs.usage import RunUsage
from relayflow.engine._base import MAX_RACES, Limits, Work
from relayflow.engine._holding import RunHolding
from relayflow.errors import CheckpointSlotTakenError, DispatchError, StaleRunError
from relayflow.ports import InProcessDispatcher, offering_checkpoints

_log = logging.getLogger("relayflow.engine")


class _Beginning(NamedTuple):
    """An invocation begun on an unsaved record: what to save, then what to send."""

    record: RunRecord
    #: None: the record wants no invocation after all.
    sent: SentInvocation | None
    effects: list[Effect]
    limits: Limits


class _Begun(NamedTuple):
    """The saved answer of one invocation that also began the next one."""

    saved: RunRecord
    sent: SentInvocation
    limits: Limits


class InvocationCycle(RunHolding):
    """Begins, dispatches and settles invocations of held runs."""

    def _invoke(
        self,
        stored: RunRecord,
        draft: RunRecord,
        effects: list[Effect],
        owner: str,
        work: Work,
        *,
        more: int,
    ) -> tuple[tuple[RunRecord, RunRecord] | None, int]:
        """Save the draft with the invocation begun, dispatch it, and settle the answer; and
        the invocations made.

        ``more``: how many further invocations may follow at once. An answer that leaves the
        run due for one is saved together with the next invocation's beginning, so an
        invocation costs one save, not two.
        """
        if self.checkpoints is not None and draft.checkpoint_open:
            draft = self._fence(draft)
        begun = self._begin(draft, owner)
        saved = self._save(stored, begun.record)
        if saved is None:
            return self._acquire(stored.id, owner, take_over=False), 1
        self._apply_effects([*effects, *begun.effects], work, driving=stored.id)
        sent, limits, made = begun.sent, begun.limits, 1
        while sent is not None:
            settled = self._dispatch(saved, sent, limits, owner, work, then_begin=made <= more)
            if not isinstance(settled, _Begun):
                return settled, made
            saved, sent, limits = settled
            made += 1
        return (saved, saved), made

    def _begin(self, draft: RunRecord, owner: str) -> _Beginning:
        """The draft with an invocation begun and leased to ``owner`` for it."""
        now = self.clock.now_ms()
        limits = self._limits(now)
        lease_until = limits.lease_until
        start, sent = begin_invocation(draft, now, self.settings)
        # While leased, the run is due for the sweeper only once the lease has expired.
        wake_at = start.record.wake_at
        record = start.record.model_copy(
            update={
                "lease": Lease(owner=owner, expires_at=lease_until),
                "wake_at": None if wake_at is None else max(wake_at, lease_until),
                "checkpoint_open": self.checkpoints is not None,
            }
        )
        return _Beginning(record, sent, list(start.effects), limits)

    def _begin_next(self, record: RunRecord, now: int, owner: str) -> _Beginning | None:
        """The next invocation begun on a settled answer, if the run is due for one now (as
        the drive loop would find it); None otherwise."""
        effects: list[Effect] = []
        tick = on_alarm(record, now, self.settings)
        if tick.changed:
            record = tick.record
            effects.extend(tick.effects)
        if not self._wants_invocation(record, now) or not self._time_for_invocation(now):
            return None
        begun = self._begin(record, owner)
        return begun._replace(effects=[*effects, *begun.effects])

    def _dispatch(
        self,
        saved: RunRecord,
        sent: SentInvocation,
        limits: Limits,
        owner: str,
        work: Work,
        *,
        then_begin: bool,
    ) -> tuple[RunRecord, RunRecord] | _Begun | None:
        """Send the invocation ``saved`` began and settle the host's answer."""
        request = build_request(
            saved,
            sent.started_at,
            self.settings,
            deadline=limits.request_deadline,
            checkpoints=self.checkpoints is not None,
        ).to_wire()
        dispatcher = self.dispatchers.resolve(
            workflow_id=saved.workflow_id, tenant_script=saved.tenant_meta.tenant_script
        )
        answer: tuple[int, Any] | None = None
        failure: DispatchError | None = None
        with self._leases.hold(saved, limits.hold_until, self.settings.lease_ms) as held:
            try:
                with offering_checkpoints(self.checkpoints):
                    if isinstance(dispatcher, InProcessDispatcher):
                        answer = dispatcher.dispatch_in_process(request)
                    else:
                        answer = dispatcher.dispatch(request)
            except DispatchError as exc:
                failure = exc
            except Exception as exc:
                # An unexpected dispatcher failure is treated like an unreachable host:
                # retried with backoff, then the run fails with handler_error naming it.
                failure = DispatchError(
                    f"dispatcher failed: {type(exc).__name__}: {exc}", transient=True
                )
        self._invoked(saved, sent.started_at, *_outcome_of(answer, failure, held.lost))
        if answer is not None:
            self._count_host_usage(answer[1])
        if held.lost:
            # Another holder took the run (and fenced the host off): nothing here is saved.
            return None
        if answer is not None and ended_unavailable(answer[1]):
            self._interrupted(saved.id, UNAVAILABLE_REASON)
        return self._settle_answer(
            held.record, owner, sent, answer, failure, work, then_begin=then_begin
        )

    def _count_host_usage(self, body: Any) -> None:
        """Count for the run what a step host in a process of its own reports its checkpoint
        writes cost (an answer that says nothing usable counts nothing)."""
        reported = (
            body.get("checkpointUsage")
            if isinstance(body, Mapping)
            else getattr(body, "checkpoint_usage", None)
        )
        if reported is None:
            return
        try:
            usage = RunUsage.model_validate(reported)
        except ValidationError:
            _log.warning("a step host reported checkpoint usage that is not a usage: ignored")
            return
        self.usage.add_current(usage)

    def _fence(self, draft: RunRecord) -> RunRecord:
        """Fold what the previous invocation's host made durable, then fence that host off.

        The previous answer was never applied (a crash, a lost lease, a transport failure):
        its host may still be writing. The fence takes the next free slot, so that host's
        next checkpoint is refused; entries it wrote before the fence are kept.
        """
        assert self.checkpoints is not None
        folded = working_copy(draft)
        for _ in range(MAX_RACES):
            fold(folded, self.checkpoints.read(folded.id, folded.checkpoint_seq))
            fence = fence_entry(folded.checkpoint_seq + 1)
            try:
                self.checkpoints.append(folded.id, fence)
            except CheckpointSlotTakenError:
                continue
            folded.checkpoint_seq = fence.seq
            return folded
        raise StaleRunError(f"run {draft.id}: could not fence its checkpoint log")

    def _settle_answer(
        self,
        current: RunRecord | None,
        owner: str,
        sent: SentInvocation,
        answer: tuple[int, Any] | None,
        failure: DispatchError | None,
        work: Work,
        *,
        then_begin: bool = False,
    ) -> tuple[RunRecord, RunRecord] | _Begun | None:
        """Save the host's answer; when nothing is left to do, let go of the lease with it.

        ``then_begin``: when the answer leaves the run due for another invocation, the same
        save begins it (see :meth:`_invoke`).
        """
        run_id = current.id if current is not None else ""
        if answer is not None and _is_fenced(answer):
            # Another holder fenced the host off: the run is theirs, nothing here is saved.
            return None
        for _ in range(MAX_RACES):
            if current is None or not self._holds(current, owner):
                return None
            now = self.clock.now_ms()
            if answer is not None:
                transition = apply_response(current, answer[0], answer[1], sent, now, self.settings)
            else:
                assert failure is not None
                transition = dispatch_failed(
                    current,
                    sent,
                    str(failure),
                    transient=failure.transient,
                    now=now,
                    settings=self.settings,
                )
            new = transition.record
            done = (
                not current.dirty
                and not self._wants_invocation(new, now)
                and (new.is_terminal or not on_alarm(new, now, self.settings).changed)
            )
            if done:
                new = new.model_copy(update={"lease": None})
            following = self._begin_next(new, now, owner) if then_begin and not done else None
            saved = self._save(current, following.record if following is not None else new)
            if saved is None:
                current = self.runs.get(run_id)
                continue
            effects = [*transition.effects, *(following.effects if following else ())]
            self._apply_effects(effects, work, driving=current.id)
            if following is not None and following.sent is not None:
                return _Begun(saved, following.sent, following.limits)
            return self._look_again(saved, owner) if done else (saved, saved)
        raise StaleRunError(f"run {run_id} kept changing; gave up after {MAX_RACES} attempts")


def _outcome_of(
    answer: tuple[int, Any] | None, failure: DispatchError | None, lost: bool
) -> tuple[str, bool]:
    """How an invocation ended, as its span tells it, and whether that is a failure."""
    if lost:
        return "lease_lost", True
    if answer is None:
        return ("unreachable" if failure is not None and failure.transient else "refused"), True
    status, body = answer
    # In process, hosts answer with the parsed response; over the wire, with its JSON.
    outcome = body.get("status") if isinstance(body, dict) else getattr(body, "status", None)
    if not isinstance(outcome, str):
        outcome = f"http_{status}"
    return outcome, status >= 400


def _is_fenced(answer: tuple[int, Any]) -> bool:
    status, body = answer
    return status == 409 and isinstance(body, dict) and body.get("error") == "checkpoint_fenced"
