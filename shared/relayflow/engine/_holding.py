"""Holding a run: taking its lease, saving drafts under it, taking stored deliveries and
letting go (looking again when someone changed the run meanwhile)."""

from __future__ import annotations

import logging

from relayflow.core.effects import Effect
from relayflow.core.outcome import finish, runtime_error, working_copy
from relayflow.core.pending import take, waits_on_timers_only
from relayflow.core.record import Lease, RunRecord
from relayflow.engine._base import MAX_RACES, Work
from relayflow.engine._effects import EffectApplier
from relayflow.errors import RelayflowError, StaleRunError, StorageRefusedError

_log = logging.getLogger("relayflow.engine")


class RunHolding(EffectApplier):
    """Takes a run's lease, saves what a drive changed and lets go of it."""

    def _acquire(
        self,
        run_id: str,
        owner: str,
        take_over: bool,
        known: RunRecord | None = None,
        *,
        mark_leased: bool = True,
    ) -> tuple[RunRecord, RunRecord] | None:
        """The stored run and an unsaved copy leased to ``owner``, or None if not ours to drive.

        The lease is written by the first save of the drive, together with whatever that save
        carries (an alarm's resolutions, the next invocation): it is never a write of its own.
        A run leased by a live holder is marked dirty instead, so its holder looks again.
        """
        for _ in range(MAX_RACES):
            # A record known from this call may be stale: the conditional save catches that.
            record, known = (known, None) if known is not None else (self.runs.get(run_id), None)
            now = self.clock.now_ms()
            if record is None or record.is_terminal:
                return None
            lease = record.lease
            ours = lease is not None and lease.owner == owner
            if not ours and not take_over and not self._needs_attention(record, now):
                return None
            if lease is not None and lease.expires_at > now and not (ours or take_over):
                if record.dirty or not mark_leased:
                    return None
                marked = record.model_copy(update={"dirty": True})
                try:
                    self._note_saved(self.runs.save(marked, expected_version=record.version))
                except StaleRunError:
                    continue
                return None
            leased = record.model_copy(
                update={
                    "lease": Lease(owner=owner, expires_at=self._limits(now).lease_until),
                    "dirty": False,
                }
            )
            return record, leased
        return None

    def _take_stored(self, draft: RunRecord, now: int, effects: list[Effect]) -> RunRecord:
        """Take the run's stored deliveries into the draft; they are removed from the store
        once a save carries them (see :meth:`_save`)."""
        if self.pending is None:
            return draft
        stored = self.pending.pending(draft.id)
        if not stored:
            return draft
        taken = take(draft, stored, now, self.settings)
        if taken.refused:
            _log.warning(
                "run %s: inbox full, stored deliveries %s dropped", draft.id, taken.refused
            )
        self._settling(draft.id).update(taken.settled)
        effects.extend(taken.transition.effects)
        return taken.transition.record

    def _settling(self, run_id: str) -> set[str]:
        """Stored deliveries of ``run_id`` the next save of this thread's drive carries."""
        settling: dict[str, set[str]] | None = getattr(self._local, "settling", None)
        if settling is None:
            settling = self._local.settling = {}
        return settling.setdefault(run_id, set())

    def _settled(self, run_id: str, saved: bool) -> None:
        settling: dict[str, set[str]] = getattr(self._local, "settling", {})
        ids = settling.pop(run_id, set())
        if saved and ids and self.pending is not None:
            self.pending.remove(run_id, ids)

    def _look_again(self, released: RunRecord, owner: str) -> tuple[RunRecord, RunRecord] | None:
        """After letting go: a delivery stored while the run was held is taken now (it saw
        the lease, so it left the run to its holder). An ended run takes nothing more.

        Each delivery that sees the lease marks the run or finds it marked, so a run that
        waits on timers only and was not marked while held is not looked at: what a dead
        delivery process stored without marking it is taken once the run waits on something
        a delivery resolves (or by the next delivery).
        """
        marked_runs = self._marked_while_held()
        marked = released.id in marked_runs
        marked_runs.discard(released.id)
        if self.pending is None or released.is_terminal:
            return None
        if not marked and waits_on_timers_only(released):
            return None
        if not self.pending.pending(released.id):
            return None
        return self._acquire(released.id, owner, take_over=False)

    def _marked_while_held(self) -> set[str]:
        """Runs this thread saved over a dirty record since it last let go of them."""
        marked: set[str] | None = getattr(self._local, "marked", None)
        if marked is None:
            marked = self._local.marked = set()
        return marked

    def _save(self, old: RunRecord, new: RunRecord) -> RunRecord | None:
        """Save ``new`` over ``old``; None when the race was lost (or the save was refused
        for good, in which case the run has been failed)."""
        if new == old:
            self._settled(old.id, saved=True)
            return old
        try:
            saved = self.runs.save(new, expected_version=old.version)
        except StaleRunError:
            self._settled(old.id, saved=False)
            return None
        except RelayflowError as exc:
            self._settled(old.id, saved=False)
            if getattr(exc, "transient", False):
                raise
            self._fail_unsaveable(old, exc)
            return None
        self._settled(old.id, saved=True)
        if old.dirty:
            self._marked_while_held().add(old.id)
        self._observe(old, saved)
        return saved

    def _fail_unsaveable(self, stored: RunRecord, exc: RelayflowError) -> None:
        """The store refused a save for a reason no retry fixes: end the run ``failed`` from
        its last saved state, instead of leaving it leased and driven again after every lease
        expiry. The code is the storage's own when it names what was refused (a permission,
        a size limit), else ``run_save_refused``."""
        rec = working_copy(stored)
        message = f"the run could not be saved: {exc.message}"
        code = exc.code if isinstance(exc, StorageRefusedError) else "run_save_refused"
        effects = finish(rec, "failed", self.clock.now_ms(), error=runtime_error(code, message))
        rec.lease = None
        rec.dirty = False
        try:
            saved = self.runs.save(rec, expected_version=stored.version)
        except StaleRunError:
            return
        _log.error("run %s failed: %s", stored.id, message)
        self._observe(stored, saved)
        self._apply_effects(effects, Work(), driving=stored.id)

    def _let_go(
        self,
        stored: RunRecord,
        draft: RunRecord,
        effects: list[Effect],
        owner: str,
        work: Work,
    ) -> tuple[RunRecord, RunRecord] | None:
        """Save the draft without the lease; if the run was marked dirty, look again instead."""
        if stored.dirty:
            saved = self._save(stored, draft.model_copy(update={"dirty": False}))
            if saved is None:
                return self._acquire(stored.id, owner, take_over=False)
            self._apply_effects(effects, work, driving=stored.id)
            return saved, saved
        saved = self._save(stored, draft.model_copy(update={"lease": None}))
        if saved is None:
            return self._acquire(stored.id, owner, take_over=False)
        self._apply_effects(effects, work, driving=stored.id)
        return self._look_again(saved, owner)
