"""DynamoDB audit log and workflow pause marks, in the runs table.

Audit entries: one item each under ``#audit#<environment>#<UTC day>``, sort key
``<at, 15 digits>#<id>``. Recording is a put conditional on the item not existing, so the
same entry recorded twice (a retried action) is one item; a refused put is success. Each
item carries the table's TTL attribute, :data:`~relayflow.operations.audit.RETENTION_DAYS`
after the action. A listing walks the days newest first, querying each environment's
partition backwards and merging them in the shared order (``relayflow.operations.audit``),
so a page reads only the days it reaches.

Workflow pauses: one item per (environment, workflow) under ``#wfpause#<environment>``,
sort key the workflow id. Pausing is a put conditional on no mark existing; resuming is a
delete that returns the mark it removed.
"""

from __future__ import annotations

import heapq
import json
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from relayflow.adapters.aws import tables as t
from relayflow.adapters.aws.errors import reraise
from relayflow.adapters.aws.flow_table import FlowTable, item_key, refused
from relayflow.operations.audit import (
    AuditWindow,
    encode_cursor,
    environments_of,
    expires_at_s,
    position_of,
    sort_key,
    time_prefix,
    utc_day,
    window_of,
)
from relayflow.operations.ports import AuditEntry, AuditPage, AuditQuery, WorkflowPause
from relayflow.ports import Clock
from relayflow.protocol import ENVIRONMENTS

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

AUDIT_PREFIX = "#audit#"
PAUSE_PREFIX = "#wfpause#"
#: Attributes an audit item carries beside its JSON, for the listing's filters.
_FILTERS = {"kind": "kind", "workflow_id": "workflowId", "run_id": "runId"}
#: Sorts after ``#`` and before every character an id can hold past it: the upper bound of
#: the keys of one millisecond.
_AFTER_TIME = "$"
#: Items a filtered query reads per request.
_FILTERED_PAGE = 1000


def audit_partition(environment: str, day: str) -> str:
    """The partition of one environment's entries of one UTC day."""
    return f"{AUDIT_PREFIX}{environment}#{day}"


class DynamoDBAuditLog(FlowTable):
    """The :class:`~relayflow.operations.ports.AuditLog` port on the runs table.

    Args:
        table_name: The runs table.
        client_factory: Builds the DynamoDB client on first use.
        clock: Gives ``now``, the default end of a listing's window.
    """

    def __init__(
        self, table_name: str, *, client_factory: Callable[[], DynamoDBClient], clock: Clock
    ) -> None:
        super().__init__(table_name, client_factory=client_factory)
        self._clock = clock

    def record(self, entry: AuditEntry) -> None:
        """Store ``entry`` with one conditional put (a repeat changes nothing)."""
        item: dict[str, Any] = {
            **item_key(
                audit_partition(entry.environment, utc_day(entry.at)),
                sort_key(entry.at, entry.id),
            ),
            "entry": {"S": json.dumps(entry.to_document(), separators=(",", ":"))},
            t.TTL_ATTRIBUTE: {"N": str(expires_at_s(entry.at))},
        }
        for field, attribute in _FILTERS.items():
            value = getattr(entry, field)
            if value is not None:
                item[attribute] = {"S": value}
        try:
            self._db().put_item(
                TableName=self.table_name,
                Item=item,
                ConditionExpression="attribute_not_exists(#sk)",
                ExpressionAttributeNames={"#sk": t.SK},
            )
        except Exception as exc:
            if refused(exc):
                return
            reraise(exc, "recording an audit entry")

    def list(self, query: AuditQuery) -> AuditPage:
        """Entries matching ``query``, newest first (see the port).

        Raises:
            ValidationError: A bad limit or cursor.
        """
        window = window_of(query, self._clock.now_ms())
        found: list[AuditEntry] = []
        try:
            for day in window.days():
                partitions = [
                    self._day_entries(audit_partition(env, day), window, query)
                    for env in environments_of(query)
                ]
                for entry in heapq.merge(*partitions, key=position_of, reverse=True):
                    found.append(entry)
                    if len(found) > window.limit:
                        page = found[: window.limit]
                        cursor = encode_cursor(position_of(page[-1]))
                        return AuditPage(entries=page, next_cursor=cursor)
        except Exception as exc:
            reraise(exc, "listing the audit log")
        return AuditPage(entries=found)

    def _day_entries(
        self, partition: str, window: AuditWindow, query: AuditQuery
    ) -> Iterator[AuditEntry]:
        """One partition's entries inside ``window`` and ``query``'s filters, newest first,
        read a page at a time as the merge asks for them."""
        low = time_prefix(window.since)
        high = time_prefix(window.until - 1) + _AFTER_TIME
        if window.after is not None:
            high = min(high, window.after.sort_key)
        if low > high:
            return
        names = {"#pk": t.PK, "#sk": t.SK}
        values: dict[str, Any] = {":pk": {"S": partition}, ":low": {"S": low}, ":high": {"S": high}}
        conditions = []
        for field, attribute in _FILTERS.items():
            wanted = getattr(query, field)
            if wanted is not None:
                names[f"#{attribute}"] = attribute
                values[f":{attribute}"] = {"S": wanted}
                conditions.append(f"#{attribute} = :{attribute}")
        params: dict[str, Any] = {
            "TableName": self.table_name,
            "KeyConditionExpression": "#pk = :pk AND #sk BETWEEN :low AND :high",
            "ExpressionAttributeNames": names,
            "ExpressionAttributeValues": values,
            "ScanIndexForward": False,
            # A page a little over the listing's limit: one request serves most listings.
            "Limit": window.limit + 1,
        }
        if conditions:
            params["FilterExpression"] = " AND ".join(conditions)
            # Limit counts the items read, not those that pass the filter: read wider pages
            # so a selective filter takes a few requests, not one per ``limit`` items.
            params["Limit"] = max(window.limit + 1, _FILTERED_PAGE)
        while True:
            answer = self._db().query(**params)
            for item in answer.get("Items", []):
                entry = AuditEntry.model_validate(json.loads(item["entry"]["S"]))
                if window.admits(entry):
                    yield entry
            if "LastEvaluatedKey" not in answer:
                return
            params["ExclusiveStartKey"] = answer["LastEvaluatedKey"]


class DynamoDBWorkflowPauses(FlowTable):
    """The :class:`~relayflow.operations.ports.WorkflowPauses` port on the runs table."""

    def pause(self, mark: WorkflowPause) -> bool:
        """Put the mark unless one exists (False then: the first mark is kept)."""
        try:
            self._db().put_item(
                TableName=self.table_name,
                Item={
                    **item_key(PAUSE_PREFIX + mark.environment, mark.workflow_id),
                    "mark": {"S": json.dumps(mark.to_document(), separators=(",", ":"))},
                },
                ConditionExpression="attribute_not_exists(#sk)",
                ExpressionAttributeNames={"#sk": t.SK},
            )
        except Exception as exc:
            if refused(exc):
                return False
            reraise(exc, "pausing a workflow")
        return True

    def resume(self, workflow_id: str, environment: str) -> WorkflowPause | None:
        """Delete the mark; the one removed, or None when there was none."""
        try:
            answer = self._db().delete_item(
                TableName=self.table_name,
                Key=item_key(PAUSE_PREFIX + environment, workflow_id),
                ReturnValues="ALL_OLD",
            )
        except Exception as exc:
            reraise(exc, "resuming a workflow")
        old = answer.get("Attributes")
        return None if not old else _mark_of(old)

    def get(self, workflow_id: str, environment: str) -> WorkflowPause | None:
        """The workflow's mark (a consistent read), or None."""
        try:
            item = self._get(item_key(PAUSE_PREFIX + environment, workflow_id))
        except Exception as exc:
            reraise(exc, "reading a workflow's pause")
        return None if item is None else _mark_of(item)

    def list(self, environment: str | None = None) -> list[WorkflowPause]:
        """Every mark (of one environment), by environment then workflow id."""
        marks: list[WorkflowPause] = []
        for env in sorted(ENVIRONMENTS) if environment is None else [environment]:
            params: dict[str, Any] = {
                "TableName": self.table_name,
                "KeyConditionExpression": "#pk = :pk",
                "ExpressionAttributeNames": {"#pk": t.PK},
                "ExpressionAttributeValues": {":pk": {"S": PAUSE_PREFIX + env}},
                "ConsistentRead": True,
            }
            while True:
                try:
                    answer = self._db().query(**params)
                except Exception as exc:
                    reraise(exc, "listing paused workflows")
                marks.extend(_mark_of(item) for item in answer.get("Items", []))
                if "LastEvaluatedKey" not in answer:
                    break
                params["ExclusiveStartKey"] = answer["LastEvaluatedKey"]
        return marks


def _mark_of(item: dict[str, Any]) -> WorkflowPause:
    return WorkflowPause.model_validate(json.loads(item["mark"]["S"]))
