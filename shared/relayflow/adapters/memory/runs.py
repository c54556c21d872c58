"""An in-memory run store with the same guarantees as the DynamoDB one: atomic inserts,
saves conditional on the version, stored as JSON text, real cursors."""

from __future__ import annotations

import threading
from typing import NamedTuple

from relayflow.core.cursors import decode_cursor, encode_cursor
from relayflow.core.record import RunRecord, is_child_of
from relayflow.core.versions import build_of, pinned_function
from relayflow.errors import RunAlreadyExistsError, StaleRunError, ValidationError
from relayflow.ports import RunPage, RunQuery, VersionUsage


def matches_query(record: RunRecord, query: RunQuery) -> bool:
    """True when ``record`` passes every filter of ``query`` (the cursor aside)."""
    if query.environment is not None and record.environment != query.environment:
        return False
    if query.workflow_id is not None and record.workflow_id != query.workflow_id:
        return False
    if query.statuses and record.status not in query.statuses:
        return False
    if query.tag is not None and query.tag not in record.tags:
        return False
    if query.code_version is not None and build_of(record) != query.code_version:
        return False
    if query.parent_run_id is not None and not is_child_of(record, query.parent_run_id):
        return False
    if query.started_after is not None and record.started_at < query.started_after:
        return False
    return query.started_before is None or record.started_at < query.started_before


class _Stored(NamedTuple):
    """One stored run: its JSON text, the two fields read without parsing it, and whether
    a delivery marked it (kept beside the text, like the mark beside a DynamoDB header's
    document)."""

    version: int
    wake_at: int | None
    text: str
    marked: bool = False

    @classmethod
    def of(cls, record: RunRecord) -> _Stored:
        return cls(record.version, record.wake_at, record.model_dump_json(by_alias=True))

    def record(self) -> RunRecord:
        record = RunRecord.model_validate_json(self.text)
        if self.marked:
            record = record.model_copy(update={"dirty": True, "delivery_mark": True})
        return record


class InMemoryRunStore:
    """Run records as JSON text in a dict, guarded by one lock.

    Text, as a database keeps it: a reader never shares an object with the writer, and a
    stored run is one string, not a tree of dicts and lists (one per journal entry) that
    every full collection of the garbage collector would walk for as long as it is kept.
    """

    def __init__(self) -> None:
        self._docs: dict[str, _Stored] = {}
        self._changed = threading.Condition()

    def get(self, run_id: str) -> RunRecord | None:
        """The stored record, or None."""
        with self._changed:
            stored = self._docs.get(run_id)
        return stored.record() if stored is not None else None

    def get_header(self, run_id: str) -> RunRecord | None:
        """The stored record (in memory the whole record is as cheap as its header)."""
        return self.get(run_id)

    def try_insert(self, record: RunRecord) -> RunRecord:
        """Insert at version 1; raises ``RunAlreadyExistsError(existing=...)`` if present."""
        inserted = record.model_copy(update={"version": 1})
        stored = _Stored.of(inserted)
        with self._changed:
            existing = self._docs.get(record.id)
            if existing is None:
                self._docs[record.id] = stored
                self._changed.notify_all()
        if existing is not None:
            raise RunAlreadyExistsError(existing=existing.record())
        return inserted

    def save(self, record: RunRecord, *, expected_version: int) -> RunRecord:
        """Store ``record`` as version ``expected_version + 1`` if the stored one matches."""
        saved = record.model_copy(update={"version": expected_version + 1, "delivery_mark": False})
        stored = _Stored.of(saved)
        with self._changed:
            current = self._docs.get(record.id)
            version = current.version if current is not None else None
            if version != expected_version:
                raise StaleRunError(
                    f"run {record.id} is at version {version}, not {expected_version}"
                )
            if current is not None and current.marked and not record.delivery_mark:
                raise StaleRunError(f"run {record.id} was marked by a delivery since it was read")
            self._docs[record.id] = stored
            self._changed.notify_all()
        return saved

    def mark_dirty(self, run_id: str, *, version: int) -> bool:
        """Mark the stored run dirty if it is at ``version`` (its version stays)."""
        with self._changed:
            current = self._docs.get(run_id)
            if current is None or current.version != version:
                return False
            self._docs[run_id] = current._replace(marked=True)
            self._changed.notify_all()
        return True

    def list_runs(self, query: RunQuery) -> RunPage:
        """Runs matching ``query``, newest first, ``query.limit`` per page."""
        if query.limit < 1:
            raise ValidationError(f"limit must be at least 1, got {query.limit}")
        with self._changed:
            stored = list(self._docs.values())
        records = [s.record() for s in stored]
        chosen = sorted(
            (r for r in records if matches_query(r, query)),
            key=lambda r: (r.started_at, r.id),
            reverse=True,
        )
        if query.cursor is not None:
            after = decode_cursor(query.cursor)
            chosen = [r for r in chosen if (r.started_at, r.id) < after]
        page = chosen[: query.limit]
        more = len(chosen) > query.limit
        next_cursor = encode_cursor(page[-1].started_at, page[-1].id) if more else None
        return RunPage(runs=page, next_cursor=next_cursor)

    def due_runs(self, before_ms: int, limit: int = 100) -> list[str]:
        """Unfinished runs whose wake time is at or before ``before_ms``, earliest first."""
        with self._changed:
            due = [
                (stored.wake_at, run_id)
                for run_id, stored in self._docs.items()
                if stored.wake_at is not None and stored.wake_at <= before_ms
            ]
        return [run_id for _, run_id in sorted(due)[:limit]]

    def version_usage(self, function: str) -> VersionUsage:
        """Whether a run pinned to the qualified function ``function`` lives, or when the
        last one ended (the same answer as the DynamoDB store's index)."""
        with self._changed:
            stored = list(self._docs.values())
        pinned = [r for r in (s.record() for s in stored) if pinned_function(r) == function]
        ended = [r.completed_at or r.started_at for r in pinned if r.is_terminal]
        return VersionUsage(
            live=len(ended) < len(pinned), last_ended_at=max(ended) if ended else None
        )

    def wait_for_change(self, run_id: str, after_version: int, timeout_s: float) -> bool:
        """Block until ``run_id`` is stored at a version above ``after_version``."""
        with self._changed:
            return bool(
                self._changed.wait_for(
                    lambda: self._version(run_id) > after_version,
                    timeout=timeout_s,
                )
            )

    def _version(self, run_id: str) -> int:
        stored = self._docs.get(run_id)
        return stored.version if stored is not None else 0
