"""Operating concurrency keys: who holds a key's slots, who waits in its queue, how full a
queued run's key is (for its status line), and freeing the slot of a run that ended without
giving it back.

Reads go to the engine's slots store; a release goes through
:meth:`~relayflow.engine.Engine.release_slot`, the same path the end of a run takes, so the
queued runs it starts are started and handed off to be driven at once.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from relayflow.core.record import RunRecord
from relayflow.engine import Engine
from relayflow.errors import RelayflowError, ValidationError
from relayflow.flow import admission
from relayflow.flow.declarations import Concurrency
from relayflow.flow.ports import ConcurrencySlots, QueuedRun, SlotHolder, SlotScope
from relayflow.flow.status import KeyOccupancy

_log = logging.getLogger("relayflow.admin")


class NotConcurrencyLimitedError(RelayflowError):
    """The workflow declares no ``concurrency`` (or this deployment does not enforce it)."""

    code = "not_concurrency_limited"


class RunStillActiveError(RelayflowError):
    """A release asked for a run that has not ended: its end frees its slot, so cancel it."""

    code = "run_active"


@dataclass(frozen=True)
class KeyState:
    """A concurrency key's slots: its holders (oldest first) and its queue (next first)."""

    workflow_id: str
    key: str
    concurrency: Concurrency
    holders: list[SlotHolder]
    queue: list[QueuedRun]

    @property
    def in_use(self) -> int:
        """Slots held."""
        return len(self.holders)


@dataclass(frozen=True)
class SlotRelease:
    """What a release did: whether the run held a slot or a queue place, and the queued runs
    that took the freed slots (started and handed off to be driven)."""

    workflow_id: str
    key: str
    run_id: str
    released: bool
    started: list[str]


class ConcurrencyAdmin:
    """Lists and repairs the concurrency slots the engine enforces."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def _gate(self, workflow_id: str, environment: str) -> tuple[ConcurrencySlots, Concurrency]:
        declared = self.engine.declared_concurrency(workflow_id, environment)
        slots = self.engine.slots
        if declared is None or slots is None:
            raise NotConcurrencyLimitedError(
                f"workflow {workflow_id!r} declares no concurrency limit that this deployment "
                "enforces, so it has no slots to show or release"
            )
        return slots, declared

    def _key(self, workflow_id: str, declared: Concurrency, key: str | None) -> str:
        if key is None and declared.key is not None:
            raise ValidationError(
                f"workflow {workflow_id!r} limits runs per concurrency key: say which key"
            )
        return key or ""

    def key_state(
        self, workflow_id: str, key: str | None = None, *, environment: str = "development"
    ) -> KeyState:
        """The holders and queue of ``key`` (omit it for a limit over the whole workflow), as
        the workflow's ``concurrency`` in ``environment`` declares it.

        Raises:
            NotConcurrencyLimitedError: The workflow has no enforced ``concurrency``.
            ValidationError: No key was given for a workflow limited per key.
        """
        slots, declared = self._gate(workflow_id, environment)
        scope = SlotScope(workflow_id, self._key(workflow_id, declared, key))
        return KeyState(workflow_id, scope.key, declared, slots.holders(scope), slots.queue(scope))

    def release(
        self,
        workflow_id: str,
        run_id: str,
        key: str | None = None,
        *,
        environment: str = "development",
    ) -> SlotRelease:
        """Free the slot (or queue place) an ended or unknown run still has under ``key``
        (default: the key the run was admitted under), and start the queued runs that take
        it. A known run's own environment wins over ``environment``. Safe to repeat: a
        repeat frees nothing and starts nobody.

        Raises:
            NotConcurrencyLimitedError: The workflow has no enforced ``concurrency``.
            RunStillActiveError: The run has not ended (cancel it: its end frees its slot).
            ValidationError: The run belongs to another workflow, or no key was given for a
                workflow limited per key and the run is unknown.
        """
        run = self.engine.runs.get(run_id)
        if run is not None:
            self._check_releasable(run, workflow_id)
            key = key if key is not None else run.concurrency_key
            environment = run.environment
        slots, declared = self._gate(workflow_id, environment)
        scope = SlotScope(workflow_id, self._key(workflow_id, declared, key))
        held = {holder.run_id for holder in slots.holders(scope)}
        waiting = {queued.run_id for queued in slots.queue(scope)}
        started = self.engine.release_slot(workflow_id, scope.key, run_id, environment=environment)
        if started:
            _log.warning("slot of run %s released by an operator; started %s", run_id, started)
        return SlotRelease(workflow_id, scope.key, run_id, run_id in held | waiting, started)

    @staticmethod
    def _check_releasable(run: RunRecord, workflow_id: str) -> None:
        if run.workflow_id != workflow_id:
            raise ValidationError(
                f"run {run.id!r} is a run of {run.workflow_id!r}, not of {workflow_id!r}"
            )
        if not run.is_terminal:
            raise RunStillActiveError(
                f"run {run.id!r} is {run.status}: releasing its slot would let one run too "
                "many hold the key (or strand the run); cancel it instead, its end frees the "
                "slot and starts the next queued run"
            )

    def occupancy(self, record: RunRecord) -> KeyOccupancy | None:
        """How full a queued run's key is, for its status line (None for other runs, and
        when the slots cannot be read: a view never fails for its status line)."""
        if record.status != "queued" or record.concurrency_key is None:
            return None
        try:
            slots, declared = self._gate(record.workflow_id, record.environment)
            scope = SlotScope(record.workflow_id, record.concurrency_key)
            holders = slots.holders(admission.stored_scope(scope, declared))
        except Exception:
            _log.warning("the slots of run %s's key could not be read", record.id, exc_info=True)
            return None
        holds_one = any(holder.run_id == record.id for holder in holders)
        return KeyOccupancy(len(holders), declared.limit, holds_one)
