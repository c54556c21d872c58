"""Manifest version retention, as pure functions every manifest store shares.

The newest ``keep`` versions by registration time are kept (default 3), the current one is
never pruned, and re-registering a version refreshes its registration time, so a version that
just became current again is never the oldest.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from relayflow.errors import ValidationError

DEFAULT_KEEP = 3


@dataclass(frozen=True)
class ManifestVersion:
    """One registered version of an environment's manifest and when it was (last) registered."""

    version_id: str
    registered_at: int


@dataclass(frozen=True)
class RetentionPlan:
    """Which versions to keep (newest first, current included) and which to delete."""

    kept: tuple[str, ...]
    pruned: tuple[str, ...]


def record_registration(
    history: Sequence[ManifestVersion], version_id: str, registered_at: int
) -> list[ManifestVersion]:
    """The history after ``version_id`` is registered (again) at ``registered_at``.

    The version moves to the newest position; its time never goes below the newest time
    already recorded, so a clock that steps back cannot make a fresh registration look old.

    Args:
        history: Registered versions, oldest first.
        version_id: The version being registered.
        registered_at: Registration time (epoch ms, or any non-decreasing counter).

    Returns:
        The new history, oldest first, with ``version_id`` last.
    """
    rest = [v for v in history if v.version_id != version_id]
    newest = max((v.registered_at for v in rest), default=registered_at)
    return [*rest, ManifestVersion(version_id, max(registered_at, newest))]


def plan_retention(
    history: Sequence[ManifestVersion], current: str | None, keep: int = DEFAULT_KEEP
) -> RetentionPlan:
    """Decide which versions survive: ``current`` plus the newest others, ``keep`` in all.

    Ties in ``registered_at`` are broken by position (later in ``history`` is newer).

    Args:
        history: Registered versions (any order; oldest first by convention).
        current: The version the current pointer names (always kept), or None.
        keep: How many versions to keep, at least 1.

    Returns:
        The plan: ``kept`` newest first (``current`` first), ``pruned`` the rest.

    Raises:
        ValidationError: ``keep`` is below 1.
    """
    if keep < 1:
        raise ValidationError(f"keep must be at least 1, got {keep}")
    ordered = [
        v.version_id
        for _, v in sorted(
            enumerate(history), key=lambda p: (p[1].registered_at, p[0]), reverse=True
        )
    ]
    kept: list[str] = [current] if current is not None and current in ordered else []
    for version_id in ordered:
        if len(kept) >= keep:
            break
        if version_id not in kept:
            kept.append(version_id)
    return RetentionPlan(kept=tuple(kept), pruned=tuple(v for v in ordered if v not in kept))
