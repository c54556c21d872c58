"""Effects as data: what a transition asks the engine to do after its record is saved.

Every effect is idempotent (alarms are keyed by run id, children by their deterministic id),
so re-applying one after a retry or a crash is harmless.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from relayflow.core.record import RunRecord
from relayflow.core.trigger import TriggerSpec
from relayflow.protocol import SerializedError


@dataclass(frozen=True)
class Dispatch:
    """The run needs an invocation of its step host now."""

    run_id: str


@dataclass(frozen=True)
class ArmAlarm:
    """Arm (or move) the run's one alarm to ``wake_at`` (epoch ms)."""

    run_id: str
    wake_at: int


@dataclass(frozen=True)
class DisarmAlarm:
    """Remove the run's alarm armed at ``wake_at`` (the run ended or needs no wake-up).

    Naming the wake time keeps a late disarm from removing an alarm armed since for
    another wake time.
    """

    run_id: str
    wake_at: int | None = None


@dataclass(frozen=True)
class StartChild:
    """Insert the child run if absent (its id is ``<parentRunId>/<waitId>``) and drive it.

    If the child already ended, its end resumes the parent (again: that is idempotent).
    ``reconcile`` marks the periodic check of a child that was most likely started already:
    the engine then looks before it inserts, which is the cheaper order in that case.
    """

    parent_run_id: str
    waitpoint_id: str
    spec: TriggerSpec
    detached: bool = False
    reconcile: bool = False


@dataclass(frozen=True)
class ChildOutcome:
    """How a child run ended, as its parent's RUN wait needs it."""

    run_id: str
    status: str
    output: Any = None
    error: SerializedError | None = None


@dataclass(frozen=True)
class ResumeParent:
    """Resolve the parent's RUN wait ``waitpoint_id`` with the child's outcome."""

    parent_run_id: str
    waitpoint_id: str
    outcome: ChildOutcome


@dataclass(frozen=True)
class CancelChildren:
    """Cancel these (attached) child runs too; ones already finished are skipped."""

    run_ids: tuple[str, ...]
    reason: str | None = None
    compensate: bool = False


Effect = Dispatch | ArmAlarm | DisarmAlarm | StartChild | ResumeParent | CancelChildren


@dataclass(frozen=True)
class Transition:
    """The result of a transition: the record to save and the effects to apply after."""

    record: RunRecord
    effects: tuple[Effect, ...] = field(default_factory=tuple)
    changed: bool = True
