"""``ctx.metadata``: run-metadata updates keyed by id so replays neither drop nor double them."""

from __future__ import annotations

from typing import Any, Literal

from relayflow.protocol import MetadataUpdate
from relayflow.sdk.scope import STEP_SCOPE, ContextCore
from relayflow.sdk.serdes import dump_value


class Metadata:
    """Set, increment, append to and remove run-metadata keys.

    Updates made in the body get ids ``m:<ctx-path>:<seq>``; updates made inside a step are
    journalled on the step and re-emitted with the same ids whenever the step replays, so
    the orchestrator applies each exactly once.
    """

    def __init__(self, core: ContextCore) -> None:
        self._core = core

    def set(self, key: str, value: Any) -> None:
        """Assign ``value`` to ``key``."""
        self._emit("set", key, value)

    def increment(self, key: str, by: int | float = 1) -> None:
        """Add ``by`` to ``key`` (a missing or non-numeric value counts as 0)."""
        self._emit("increment", key, by)

    def append(self, key: str, value: Any) -> None:
        """Append ``value`` to the list at ``key`` (a missing or non-list value counts as [])."""
        self._emit("append", key, value)

    def remove(self, key: str) -> None:
        """Delete ``key``."""
        self._emit("remove", key, None)

    def _emit(
        self, op: Literal["set", "increment", "append", "remove"], key: str, value: Any
    ) -> None:
        if not isinstance(key, str) or not key:
            raise ValueError(f"invalid metadata key: {key!r}")
        scope = STEP_SCOPE.get()
        if scope is not None:
            update_id = f"{scope.id_prefix}{len(scope.updates)}"
        else:
            update_id = f"m:{self._core.path}:{self._core.meta_seq}"
            self._core.meta_seq += 1
        update = MetadataUpdate(op=op, key=key, value=dump_value(value, None), id=update_id)
        if scope is not None:
            scope.updates.append(update)
        self._core.inv.emit_metadata(update)
        if scope is None:
            self._core.inv.checkpoint_metadata(update)
