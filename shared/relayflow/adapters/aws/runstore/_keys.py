"""The keys of a run's items and of its index entries: header and page sort keys, page-set
commit ids, and the partitions and sort keys of the listing and wake-time indexes."""

from __future__ import annotations

import hashlib

from relayflow.adapters.aws import tables
from relayflow.core.record import RunRecord

#: The sort key of a run's header item.
HEADER_SK = "#run"


#: The sort key prefix of a run's page items.
PAGE_PREFIX = "g#"


def commit_id(version: int, token: str) -> str:
    """The id of the page set written by the save that makes ``version`` (one per attempt)."""
    return f"{version:012d}.{token}"


def commit_version(commit: str) -> int:
    """The version a commit id was written for."""
    return int(commit.split(".", 1)[0])


def page_sk(commit: str, index: int) -> str:
    """The sort key of the ``index``-th page of a set."""
    return f"{PAGE_PREFIX}{commit}#{index:04d}"


#: Statuses the status index files under one ``live`` partition.
LIVE_STATUSES = frozenset({"running", "waiting"})


def time_key(started_at: int, run_id: str) -> str:
    """The listing indexes' sort key: zero-padded start time, then the run id."""
    return f"{started_at:015d}#{run_id}"


def status_partition(status: str) -> str:
    """The status index partition of a run: ``live`` while running or waiting."""
    return tables.LIVE_STATUS if status in LIVE_STATUSES else status


def wake_shard(run_id: str) -> str:
    """The wake-time index partition of a run."""
    bucket = int(hashlib.sha256(run_id.encode("utf-8")).hexdigest()[:8], 16) % tables.WAKE_SHARDS
    return f"wake#{bucket}"


#: The code-version index's sort key of a run that has not ended (above every ended one).
CODE_VERSION_LIVE = "live"
_CODE_VERSION_ENDED = "ended#"


def code_version_end(record: RunRecord) -> str:
    """The code-version index's sort key of ``record``: ``live``, or when it ended."""
    if not record.is_terminal:
        return CODE_VERSION_LIVE
    ended = record.completed_at if record.completed_at is not None else record.started_at
    return f"{_CODE_VERSION_ENDED}{ended:015d}"


def code_version_ended_at(end_key: str) -> int | None:
    """When the run of a code-version index sort key ended (None: it has not)."""
    if not end_key.startswith(_CODE_VERSION_ENDED):
        return None
    return int(end_key.removeprefix(_CODE_VERSION_ENDED))
