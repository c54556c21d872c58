"""Run metadata: applying the mutations a host reports, each update id exactly once."""

from __future__ import annotations

from typing import Any

from relayflow.core.record import RunRecord
from relayflow.protocol import MetadataUpdate


def apply_update(state: dict[str, Any], update: MetadataUpdate) -> None:
    """Apply one mutation to ``state`` (reference §1.13 semantics)."""
    current = state.get(update.key)
    if update.op == "set":
        state[update.key] = update.value
    elif update.op == "increment":
        base = current if isinstance(current, int | float) and not isinstance(current, bool) else 0
        step = update.value if update.value is not None else 1
        state[update.key] = base + step
    elif update.op == "append":
        base_list = list(current) if isinstance(current, list) else []
        base_list.append(update.value)
        state[update.key] = base_list
    else:
        state.pop(update.key, None)


def apply_updates(record: RunRecord, updates: list[MetadataUpdate]) -> int:
    """Apply the updates not applied before; returns how many were applied (mutates ``record``).

    Updates with an ``id`` are applied once per id. Updates without one fall back to the
    reference's positional rule: only those past the count already applied.
    """
    applied = 0
    seen = set(record.applied_metadata_ids)
    positional = [u for u in updates if u.id is None]
    for update in updates:
        if update.id is None:
            continue
        if update.id in seen:
            continue
        apply_update(record.journal.metadata_state, update)
        record.applied_metadata_ids.append(update.id)
        seen.add(update.id)
        applied += 1
    for update in positional[record.positional_metadata_applied :]:
        apply_update(record.journal.metadata_state, update)
        applied += 1
    record.positional_metadata_applied = max(record.positional_metadata_applied, len(positional))
    return applied
