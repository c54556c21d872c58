"""Folding a run's checkpoint log into its record, and the entries the orchestrator writes.

A step host writes each completed step attempt (and each metadata update and stream chunk
made outside a step) into the run's write-once log while the invocation goes on. The record
reflects the log up to ``checkpoint_seq``; folding the entries after it is how a new holder
sees every step the previous host made durable before it crashed.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from relayflow.core.metadata import apply_updates
from relayflow.core.record import RunRecord
from relayflow.errors import CheckpointUnavailableError
from relayflow.protocol import CheckpointEntry, StreamChunk, WaitingResponse

#: The reason a host gives for ending an invocation it could not checkpoint (the meta of the
#: ``checkpoint:<n>`` wait, due at once, that it answers with).
UNAVAILABLE_REASON = CheckpointUnavailableError.code


def ended_unavailable(body: Any) -> bool:
    """True when a host's answer (a ``StepResponse`` or its wire form) ended its invocation
    because the run's checkpoint log could not be written: the run is invoked again from
    what the answer carries."""
    if isinstance(body, WaitingResponse):
        metas: list[Any] = [wait.meta for wait in body.waitpoints]
    elif isinstance(body, dict) and body.get("status") == "waiting":
        waits = body.get("waitpoints")
        metas = (
            [w.get("meta") for w in waits if isinstance(w, dict)] if isinstance(waits, list) else []
        )
    else:
        return False
    return any(
        isinstance(meta, dict) and meta.get("reason") == UNAVAILABLE_REASON for meta in metas
    )


def attempts_of(entry: object) -> int:
    """Operations a journal entry counts for: one per journalled attempt, at least one."""
    return max(1, len(getattr(entry, "attempts", ()) or ()))


def add_chunks(record: RunRecord, chunks: Iterable[StreamChunk]) -> None:
    """Append stream chunks not stored yet (a chunk is known by its stream and ``seq``)."""
    for chunk in chunks:
        stored = record.streams.setdefault(chunk.stream_id, [])
        if stored and stored[-1].seq >= chunk.seq:
            continue
        stored.append(chunk)


def fold(record: RunRecord, entries: Iterable[CheckpointEntry]) -> None:
    """Apply log entries after ``record.checkpoint_seq`` to ``record`` (a working copy).

    Step entries replace the journal entry of their key (and apply the metadata updates made
    inside the step), metadata and chunk entries apply once, a group applies its entries in
    order, fences, cancels and pauses only move the high-water mark.
    """
    for entry in entries:
        if entry.seq <= record.checkpoint_seq:
            continue
        _apply(record, entry)
        record.checkpoint_seq = entry.seq


def _apply(record: RunRecord, entry: CheckpointEntry) -> None:
    for one in expand([entry]):
        _apply_one(record, one)


def _apply_one(record: RunRecord, entry: CheckpointEntry) -> None:
    if entry.kind == "step" and entry.key is not None and entry.step is not None:
        old = record.journal.step_results.get(entry.key)
        before = attempts_of(old) if old is not None else 0
        record.journal.step_results[entry.key] = entry.step
        record.operations_count += max(0, attempts_of(entry.step) - before)
        apply_updates(record, list(entry.step.metadata_updates))
    elif entry.kind == "metadata" and entry.metadata is not None:
        apply_updates(record, [entry.metadata])
    elif entry.kind == "chunk" and entry.chunk is not None:
        add_chunks(record, [entry.chunk])


def expand(entries: Iterable[CheckpointEntry]) -> Iterator[CheckpointEntry]:
    """The entries of a log in the order they apply, each group replaced by what it carries."""
    for entry in entries:
        if entry.kind == "group":
            yield from expand(entry.entries or ())
        else:
            yield entry


def fence_entry(seq: int) -> CheckpointEntry:
    """The entry a new holder writes so the previous host's next checkpoint is refused."""
    return CheckpointEntry(seq=seq, kind="fence", reason="the run has a new holder")


def cancel_entry(seq: int, reason: str | None, compensate: bool) -> CheckpointEntry:
    """The entry that tells a running host, at its next checkpoint, that the run was cancelled."""
    return CheckpointEntry(seq=seq, kind="cancel", reason=reason, compensate=compensate)


def pause_entry(seq: int, reason: str | None) -> CheckpointEntry:
    """The entry that tells a running host, at its next checkpoint, that the run was paused."""
    return CheckpointEntry(seq=seq, kind="pause", reason=reason or "run paused")
