"""Queries of the DynamoDB run store: listing through the indexes, and due runs for the sweeper.

Listing merges the partitions an index query needs (several statuses, or every environment)
newest first; a cursor is the listing position ``(startedAt, runId)`` of the last run returned.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from relayflow.adapters.aws import attributes, tables
from relayflow.adapters.aws.errors import reraise
from relayflow.adapters.aws.runstore import _keys
from relayflow.core.cursors import decode_cursor, encode_cursor
from relayflow.core.record import RunRecord, is_child_of
from relayflow.core.versions import build_of
from relayflow.core.views import UnavailableValue
from relayflow.errors import ValidationError
from relayflow.ports import RunPage, RunQuery, VersionUsage
from relayflow.protocol import ENVIRONMENTS

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

_TIME_HIGH = "9" * 15 + "$"
#: Headers read at a time while a status filter picks the runs of a page.
_HEADER_BATCH = 100


class RunIndexReader:
    """Reads the runs table's indexes for one store.

    Args:
        table_name: The runs table.
        client: Returns the DynamoDB client.
        header_record: Builds a header-only record from a header item, and names the
            values of it the payload store no longer gives.
    """

    def __init__(
        self,
        table_name: str,
        client: Callable[[], DynamoDBClient],
        header_record: Callable[[dict[str, Any]], tuple[RunRecord, list[UnavailableValue]]],
    ) -> None:
        self.table_name = table_name
        self._db = client
        self._header_record = header_record

    # ---- listing --------------------------------------------------------------------------

    def list_runs(self, query: RunQuery) -> RunPage:
        """Runs matching ``query``, newest first; the records carry their header fields only.

        The journal, streams and other per-entry collections are empty in listed records
        (``get`` returns them); ``next_cursor`` resumes after the last run of the page.
        """
        if query.limit < 1:
            raise ValidationError(f"limit must be at least 1, got {query.limit}")
        index, key_attr, partitions, filters, wanted = _plan(query)
        low = f"{query.started_after:015d}" if query.started_after is not None else "0"
        high = _TIME_HIGH
        if query.started_before is not None:
            if query.started_before <= 0:
                return RunPage(runs=[], next_cursor=None)
            high = f"{query.started_before - 1:015d}$"
        after: str | None = None
        if query.cursor is not None:
            after = _keys.time_key(*decode_cursor(query.cursor))
            high = min(high, after)
        if low > high:
            return RunPage(runs=[], next_cursor=None)
        streams = [
            self._index_items(index, key_attr, p, low, high, filters, query.limit)
            for p in partitions
        ]
        merged = (
            item
            for item in heapq.merge(*streams, key=lambda i: i[tables.TIME_KEY]["S"], reverse=True)
            if item[tables.TIME_KEY]["S"] != after
        )
        chosen = self._matching(merged, query, wanted, query.limit + 1)
        page, more = chosen[: query.limit], len(chosen) > query.limit
        next_cursor = None
        if more and page:
            last = page[-1][0]
            next_cursor = encode_cursor(last.started_at, last.id)
        return RunPage(
            runs=[record for record, _ in page],
            next_cursor=next_cursor,
            unavailable={record.id: lost for record, lost in page if lost},
        )

    def _matching(
        self,
        items: Iterator[dict[str, Any]],
        query: RunQuery,
        wanted: frozenset[str] | None,
        count: int,
    ) -> list[tuple[RunRecord, list[UnavailableValue]]]:
        """The headers of the first ``count`` index items whose run still answers ``query``.

        The indexes are eventually consistent (a run may have left the queried status since
        its entry was written), running and waiting share ``live`` and the code version is in
        the header only: the strongly read header decides, read in batches as the page
        fills.
        """
        chosen: list[tuple[RunRecord, list[UnavailableValue]]] = []
        while len(chosen) < count:
            sifted = (
                wanted is not None
                or query.code_version is not None
                or query.parent_run_id is not None
            )
            size = _HEADER_BATCH if sifted else count - len(chosen)
            batch = [item[tables.PK]["S"] for item in itertools.islice(items, size)]
            if not batch:
                break
            chosen.extend(r for r in self._headers(batch) if _matches(r[0], query))
        return chosen[:count]

    def _index_items(
        self,
        index: str,
        key_attr: str,
        partition: str,
        low: str,
        high: str,
        filters: tuple[str, dict[str, str], dict[str, Any]] | None,
        limit: int,
    ) -> Iterator[dict[str, Any]]:
        params: dict[str, Any] = {
            "TableName": self.table_name,
            "IndexName": index,
            "KeyConditionExpression": "#p = :p AND #t BETWEEN :lo AND :hi",
            "ExpressionAttributeNames": {"#p": key_attr, "#t": tables.TIME_KEY},
            "ExpressionAttributeValues": {
                ":p": attributes.s(partition),
                ":lo": attributes.s(low),
                ":hi": attributes.s(high),
            },
            "ScanIndexForward": False,
            "Limit": min(max(limit + 1, 10), 500),
        }
        if filters is not None:
            expression, names, values = filters
            params["FilterExpression"] = expression
            params["ExpressionAttributeNames"].update(names)
            params["ExpressionAttributeValues"].update(values)
        while True:
            page = self._call("listing runs", self._db().query, **params)
            yield from page.get("Items", [])
            if "LastEvaluatedKey" not in page:
                return
            params["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def _headers(self, run_ids: list[str]) -> list[tuple[RunRecord, list[UnavailableValue]]]:
        found: dict[str, tuple[RunRecord, list[UnavailableValue]]] = {}
        for start in range(0, len(run_ids), 100):
            keys = [
                {tables.PK: attributes.s(r), tables.SK: attributes.s(_keys.HEADER_SK)}
                for r in run_ids[start : start + 100]
            ]
            pending: dict[str, Any] = {self.table_name: {"Keys": keys, "ConsistentRead": True}}
            while pending:
                answer = self._call("reading runs", self._db().batch_get_item, RequestItems=pending)
                for item in answer.get("Responses", {}).get(self.table_name, []):
                    found[item[tables.PK]["S"]] = self._header_record(item)
                pending = dict(answer.get("UnprocessedKeys") or {})
        return [found[r] for r in run_ids if r in found]

    def version_usage(self, function: str) -> VersionUsage:
        """Whether a run pinned to ``function`` (``name:7``) lives, or when the last ended:
        the greatest key of its partition of the code-version index, one item read."""
        answer = self._call(
            f"reading the runs pinned to {function}",
            self._db().query,
            TableName=self.table_name,
            IndexName=tables.INDEX_BY_CODE_VERSION,
            KeyConditionExpression="#f = :f",
            ExpressionAttributeNames={"#f": tables.CODE_VERSION_KEY},
            ExpressionAttributeValues={":f": attributes.s(function)},
            ScanIndexForward=False,
            Limit=1,
        )
        items = answer.get("Items", [])
        if not items:
            return VersionUsage(live=False, last_ended_at=None)
        ended_at = _keys.code_version_ended_at(items[0][tables.CODE_VERSION_END]["S"])
        return VersionUsage(live=ended_at is None, last_ended_at=ended_at)

    def due_runs(self, before_ms: int, limit: int = 100) -> list[str]:
        """Ids of runs whose wake time is at or before ``before_ms``, earliest first.

        The index is sorted by wake-time bucket and projects nothing else (a run parking
        again in the same bucket leaves its entry alone, and a run in flight keeps the entry
        it had when its holder took it): the exact wake times come from the headers (one
        eventually consistent read per candidate). Each shard is read, whole buckets at a
        time, until it has given ``limit`` due runs or reached the bucket holding
        ``before_ms``, so entries of runs in flight (whose header wake time is their
        lease's end) never crowd out a run that is due, however many there are.
        """
        if limit < 1:
            return []
        bucket = before_ms - before_ms % tables.WAKE_BUCKET_MS
        due: list[tuple[int, str]] = []
        for shard in range(tables.WAKE_SHARDS):
            due.extend(self._due_in_shard(f"wake#{shard}", bucket, before_ms, limit))
        return [run_id for _, run_id in sorted(due)[:limit]]

    def _due_in_shard(
        self, shard: str, bucket: int, before_ms: int, limit: int
    ) -> list[tuple[int, str]]:
        """(wake time, run id) of one shard's due runs in buckets up to ``bucket``: at least
        ``limit`` of them (when there are as many), and every due run of the last bucket
        read."""
        params: dict[str, Any] = {
            "TableName": self.table_name,
            "IndexName": tables.INDEX_BY_WAKE_TIME,
            "KeyConditionExpression": "#s = :s AND #b <= :bucket",
            "ExpressionAttributeNames": {"#s": tables.WAKE_SHARD_KEY, "#b": tables.WAKE_BUCKET},
            "ExpressionAttributeValues": {
                ":s": attributes.s(shard),
                ":bucket": attributes.n(bucket),
            },
            "Limit": min(limit, 100),
        }
        due: list[tuple[int, str]] = []
        while True:
            page = self._call("finding due runs", self._db().query, **params)
            items = page.get("Items", [])
            times = self._wake_times([item[tables.PK]["S"] for item in items])
            for item in items:
                run_id = item[tables.PK]["S"]
                wake = times.get(run_id)
                if wake is not None and wake <= before_ms:
                    due.append((wake, run_id))
            last_key = page.get("LastEvaluatedKey")
            if last_key is None:
                return due
            if len(due) >= limit:
                # The rest of the last bucket read may hold earlier wake times: finish it.
                params["KeyConditionExpression"] = "#s = :s AND #b = :bucket"
                params["ExpressionAttributeValues"][":bucket"] = last_key[tables.WAKE_BUCKET]
            params["ExclusiveStartKey"] = last_key

    def _wake_times(self, run_ids: list[str]) -> dict[str, int]:
        """The wake time each run's header holds now (runs without one are left out)."""
        times: dict[str, int] = {}
        for start in range(0, len(run_ids), 100):
            keys = [
                {tables.PK: attributes.s(r), tables.SK: attributes.s(_keys.HEADER_SK)}
                for r in dict.fromkeys(run_ids[start : start + 100])
            ]
            pending: dict[str, Any] = {
                self.table_name: {
                    "Keys": keys,
                    "ProjectionExpression": "#pk, #w",
                    "ExpressionAttributeNames": {"#pk": tables.PK, "#w": tables.WAKE_AT},
                }
            }
            while pending:
                answer = self._call(
                    "finding due runs", self._db().batch_get_item, RequestItems=pending
                )
                for item in answer.get("Responses", {}).get(self.table_name, []):
                    if tables.WAKE_AT in item:
                        times[item[tables.PK]["S"]] = int(item[tables.WAKE_AT]["N"])
                pending = dict(answer.get("UnprocessedKeys") or {})
        return times

    def _call(self, action: str, fn: Callable[..., Any], **params: Any) -> Any:
        try:
            return fn(**params)
        except Exception as exc:
            reraise(exc, action)


def _matches(record: RunRecord, query: RunQuery) -> bool:
    """Whether a run's current header still answers ``query`` (its start time never moves;
    the code version, in the header document only, is checked here and nowhere else)."""
    return (
        (not query.statuses or record.status in query.statuses)
        and (query.environment is None or record.environment == query.environment)
        and (query.workflow_id is None or record.workflow_id == query.workflow_id)
        and (query.tag is None or query.tag in record.tags)
        and (query.code_version is None or build_of(record) == query.code_version)
        and (query.parent_run_id is None or is_child_of(record, query.parent_run_id))
    )


_Filters = tuple[str, dict[str, str], dict[str, Any]]


def _plan(
    query: RunQuery,
) -> tuple[str, str, list[str], _Filters | None, frozenset[str] | None]:
    """Which index and partitions serve ``query``, the filter of the query for the fields the
    index carries, and the statuses to check on the headers (None: no check)."""
    clauses: list[str] = []
    names: dict[str, str] = {}
    values: dict[str, Any] = {}
    statuses = list(dict.fromkeys(query.statuses))
    wanted: frozenset[str] | None = frozenset(statuses) if statuses else None
    if query.workflow_id is not None:
        index, key_attr, partitions = (
            tables.INDEX_BY_WORKFLOW,
            tables.WORKFLOW_KEY,
            [query.workflow_id],
        )
        if query.environment is not None:
            names["#env"] = tables.ENVIRONMENT_KEY
            values[":env"] = attributes.s(query.environment)
            clauses.append("#env = :env")
    elif statuses:
        partitions = list(dict.fromkeys(_keys.status_partition(s) for s in statuses))
        index, key_attr = tables.INDEX_BY_STATUS, tables.STATUS_KEY
        if set(statuses) >= _keys.LIVE_STATUSES or not _keys.LIVE_STATUSES & set(statuses):
            # Every partition read holds only runs of the statuses asked for.
            wanted = None
        if query.environment is not None:
            names["#env"] = tables.ENVIRONMENT_KEY
            values[":env"] = attributes.s(query.environment)
            clauses.append("#env = :env")
    else:
        index, key_attr = tables.INDEX_BY_ENVIRONMENT, tables.ENVIRONMENT_KEY
        partitions = [query.environment] if query.environment is not None else list(ENVIRONMENTS)
    if query.tag is not None:
        names["#tags"] = "tags"
        values[":tag"] = attributes.s(query.tag)
        clauses.append("contains(#tags, :tag)")
    filters = (" AND ".join(clauses), names, values) if clauses else None
    return index, key_attr, partitions, filters, wanted
