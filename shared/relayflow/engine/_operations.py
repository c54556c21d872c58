"""Operator actions in the engine: the action each call applies, recording actions in the
audit log, new runs of a paused workflow, and the trigger of a rerun.

The entry points (``pause``, ``resume``, ``redrive``, ``rerun``, ``upgrade``) are on
:class:`~relayflow.engine.Engine`; the transitions are in :mod:`relayflow.core.operations`.
"""

from __future__ import annotations

import hashlib
import logging
import secrets
from collections.abc import Callable
from typing import Any

from relayflow.core.effects import Transition
from relayflow.core.operations import applied, note, paused_at_start, rerun_journal
from relayflow.core.outcome import working_copy
from relayflow.core.record import ActionKind, RerunOrigin, RunAction, RunRecord
from relayflow.core.trigger import TriggerSpec, resolve_run_id
from relayflow.engine._base import Work
from relayflow.engine._deferred import DeferredStarts
from relayflow.operations.ports import AuditEntry
from relayflow.protocol import RunTrigger

_log = logging.getLogger("relayflow.engine")

#: Builds the action of one call at the time it is applied.
ActionAt = Callable[[int], RunAction]


def action_at(
    kind: ActionKind,
    by: str,
    action_id: str | None,
    reason: str | None,
    detail: dict[str, Any] | None = None,
) -> ActionAt:
    """The action of one call (a random id when the caller gave none), stamped when applied."""
    chosen = action_id or f"act_{secrets.token_hex(8)}"

    def at(now: int) -> RunAction:
        return RunAction(
            id=chosen, kind=kind, by=by, at=now, reason=reason, detail=dict(detail or {})
        )

    return at


class RunOperations(DeferredStarts):
    """What the engine's operator actions share."""

    def _act(
        self,
        run_id: str,
        action: ActionAt,
        change: Callable[[RunRecord, RunAction, int], Transition],
        work: Work,
    ) -> tuple[RunRecord, RunAction | None]:
        """Apply ``change`` with the call's action; the run as stored and the action when it
        was applied now (None: the run already held it)."""

        def step(record: RunRecord, now: int) -> tuple[Transition, RunAction | None]:
            taken = action(now)
            transition = change(record, taken, now)
            return transition, (taken if transition.changed else None)

        saved, taken = self._mutate(run_id, step, work)
        # As the run keeps it: an action may add to its detail what it found on the run.
        held = next((a for a in saved.actions if a.id == action(0).id), taken)
        if held is not None:
            # Recorded again on a repeat too (the same id and time are stored once): a
            # process that died between the run's save and the audit record is made good.
            self._record_action(saved, held)
        return saved, taken

    def _record_action(self, record: RunRecord, action: RunAction) -> None:
        """Add the action to the audit log across runs (best effort: the run keeps it)."""
        if self.audit is None:
            return
        entry = AuditEntry(
            id=action.id,
            kind=action.kind,
            at=action.at,
            by=action.by,
            environment=record.environment,
            workflow_id=record.workflow_id,
            run_id=record.id,
            reason=action.reason,
            detail=action.detail,
        )
        try:
            self.audit.record(entry)
        except Exception:
            _log.exception(
                "could not add action %s of run %s to the audit log", action.id, record.id
            )

    def _paused_workflow_draft(self, record: RunRecord) -> RunRecord | None:
        """A new run's draft as inserted when its workflow is paused (None: it is not)."""
        if self.workflow_pauses is None:
            return None
        mark = self.workflow_pauses.get(record.workflow_id, record.environment)
        if mark is None:
            return None
        action = RunAction(
            id=f"wfpause_{mark.at}",
            kind="pause",
            by=mark.by,
            at=record.started_at,
            reason=mark.reason or "its workflow is paused",
        )
        return paused_at_start(record, action)

    def _rerun_spec(
        self, original: RunRecord, from_step: str, action_id: str, new_input: Any
    ) -> TriggerSpec:
        """The trigger of a rerun of ``original`` from ``from_step``: the same action id
        always makes the same run id, so a retried rerun finds the run it started."""
        journal = rerun_journal(original, from_step)
        digest = hashlib.sha256(f"{original.id}\n{action_id}".encode()).hexdigest()[:20]
        key = f"rerun-{digest}"
        trigger = RunTrigger.model_validate(
            {"kind": "api", "rerunOf": original.id, "fromStep": from_step}
        )
        return TriggerSpec(
            workflow_id=original.workflow_id,
            input=new_input,
            run_id=resolve_run_id(
                original.workflow_id, run_id=None, idempotency_key=key, generated=self.new_run_id()
            ),
            workflow_version=original.workflow_version,
            environment=original.environment,
            tags=tuple(original.tags),
            tenant_meta=original.tenant_meta,
            triggered_by=trigger,
            idempotency_key=key,
            timeout_ms=original.timeout_ms,
            rerun_of=RerunOrigin(run_id=original.id, from_step=from_step),
            journal=journal,
            code_version=original.code_version,
            versioning=original.versioning,
        )


def linked_rerun(original: RunRecord, action: RunAction, rerun_id: str) -> Transition:
    """The original run noting its rerun (once per action id)."""
    if applied(original, action.id):
        return Transition(original, (), changed=False)
    rec = working_copy(original)
    rec.reruns = [*rec.reruns, rerun_id]
    note(rec, action)
    return Transition(rec, ())
