"""An in-memory run store with the same guarantees as the DynamoDB one: atomic inserts,
saves conditional on the version, stored as JSON documents, real cursors."""

from __future__ import annotations

import threading
from typing import Any

from relayflow.core.cursors import decode_cursor, encode_cursor
from relayflow.core.record import RunRecord
from relayflow.errors import RunAlreadyExistsError, StaleRunError, ValidationError
from relayflow.ports import RunPage, RunQuery


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
    if query.started_after is not None and record.started_at < query.started_after:
        return False
    return query.started_before is None or record.started_at < query.started_before


class InMemoryRunStore:
    """Run records in a dict of JSON documents, guarded by one lock."""

    def __init__(self) -> None:
        self._docs: dict[str, dict[str, Any]] = {}
        self._changed = threading.Condition()

    def get(self, run_id: str) -> RunRecord | None:
        """The stored record, or None."""
        with self._changed:
            doc = self._docs.get(run_id)
        return RunRecord.from_document(doc) if doc is not None else None

    def get_header(self, run_id: str) -> RunRecord | None:
        """The stored record (in memory the whole record is as cheap as its header)."""
        return self.get(run_id)

    def try_insert(self, record: RunRecord) -> RunRecord:
        """Insert at version 1; raises ``RunAlreadyExistsError(existing=...)`` if present."""
        stored = record.model_copy(update={"version": 1})
        doc = stored.to_document()
        with self._changed:
            existing = self._docs.get(record.id)
            if existing is None:
                self._docs[record.id] = doc
                self._changed.notify_all()
        if existing is not None:
            raise RunAlreadyExistsError(existing=RunRecord.from_document(existing))
        return RunRecord.from_document(doc)

    def save(self, record: RunRecord, *, expected_version: int) -> RunRecord:
        """Store ``record`` as version ``expected_version + 1`` if the stored one matches."""
        stored = record.model_copy(update={"version": expected_version + 1})
        doc = stored.to_document()
        with self._changed:
            current = self._docs.get(record.id)
            version = current.get("version") if current is not None else None
            if version != expected_version:
                raise StaleRunError(
                    f"run {record.id} is at version {version}, not {expected_version}"
                )
            self._docs[record.id] = doc
            self._changed.notify_all()
        return RunRecord.from_document(doc)

    def list_runs(self, query: RunQuery) -> RunPage:
        """Runs matching ``query``, newest first, ``query.limit`` per page."""
        if query.limit < 1:
            raise ValidationError(f"limit must be at least 1, got {query.limit}")
        with self._changed:
            docs = list(self._docs.values())
        records = [RunRecord.from_document(d) for d in docs]
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
                (doc["wakeAt"], run_id)
                for run_id, doc in self._docs.items()
                if doc.get("wakeAt") is not None and doc["wakeAt"] <= before_ms
            ]
        return [run_id for _, run_id in sorted(due)[:limit]]

    def wait_for_change(self, run_id: str, after_version: int, timeout_s: float) -> bool:
        """Block until ``run_id`` is stored at a version above ``after_version``."""
        with self._changed:
            return bool(
                self._changed.wait_for(
                    lambda: self._docs.get(run_id, {}).get("version", 0) > after_version,
                    timeout=timeout_s,
                )
            )
