"""Patches: ``ctx.patched(change_id)`` and ``ctx.deprecate_patch(change_id)``.

A patch lets new code change what a body does without breaking runs that recorded their
history on the old code (runs of a ``versioning="upgrade"`` workflow move to new code at
their next invocation). ``ctx.patched("x")`` answers, at the point of the body where it is
called, whether the run reaches that point on code that has change ``x``:

* the journal records the marker of ``x`` at this point: True (the run took the new branch
  before, on code that had the patch);
* the journal holds later operations of this scope without the marker: False (a replay of
  history recorded before the patch: the old branch keeps the run's history);
* otherwise the body is at the end of its recorded history in this scope: True, and ``x``
  is journalled with the scope's next operation.

"This point" is the scope (the body, a group, a branch, a map item) and the ordinal its next
operation takes (:mod:`relayflow.sdk.ordinals`). The history goes on after it when the
journal holds an operation of the scope at that ordinal or later (or, in an unordered scope
or a journal without ordinals, an entry of the scope the invocation has not reached). Waits
take no ordinal and leave no trace of the code that reached them: a history whose scope only
holds waits after this point is read as ending here. That is what keeps a run that took the
new branch and then waited, before journalling anything, on that branch after the wait.

The marker rides on the next entry the scope journals (no write of its own). When the body
suspends before that, nothing is journalled and the next invocation reaches the same point
with the same history, so it computes the same answer again.
"""

from __future__ import annotations

from typing import Literal

from relayflow.sdk.scope import ContextCore, ensure_not_in_step

#: Where the body stands against its history at a patch point.
History = Literal["marked", "before_patch", "end"]


def check_change_id(change_id: object, what: str) -> str:
    """``change_id`` when it is a non-empty string.

    Raises:
        TypeError: Not a string.
        ValueError: An empty or blank string.
    """
    if not isinstance(change_id, str):
        raise TypeError(f"{what}: the change id must be a str, got {type(change_id).__name__}")
    if not change_id.strip():
        raise ValueError(f"{what}: the change id must be a non-empty string")
    return change_id


def history_at(core: ContextCore, change_id: str) -> History:
    """How the journal continues in ``core``'s scope at the operation it reaches next."""
    ordinal = core.order.upcoming()
    inv = core.inv
    goes_on = False
    for key, entry in inv.recorded_in(core.path):
        if ordinal is None or entry.ordinal is None:
            if change_id in (entry.patches or ()):
                return "marked"
            goes_on = goes_on or not inv.reached(key)
        elif entry.ordinal == ordinal:
            if change_id in (entry.patches or ()):
                return "marked"
            goes_on = True
        elif entry.ordinal > ordinal:
            goes_on = True
    return "before_patch" if goes_on else "end"


def _remember(core: ContextCore, change_id: str) -> None:
    if change_id not in core.pending_patches:
        core.pending_patches.append(change_id)


def patched(core: ContextCore, change_id: object) -> bool:
    """The ``ctx.patched`` operation (see :meth:`_BaseContext.patched`)."""
    checked = check_change_id(change_id, "ctx.patched")
    ensure_not_in_step("ctx.patched")
    where = history_at(core, checked)
    if where == "end":
        _remember(core, checked)
    return where != "before_patch"


def deprecate_patch(core: ContextCore, change_id: object) -> None:
    """The ``ctx.deprecate_patch`` operation (see :meth:`_BaseContext.deprecate_patch`)."""
    checked = check_change_id(change_id, "ctx.deprecate_patch")
    ensure_not_in_step("ctx.deprecate_patch")
    if history_at(core, checked) == "end":
        # Journalled as patched() would: code that still calls patched() replays it alike.
        _remember(core, checked)
