"""DynamoDB stored deliveries: one item per ``(run, injection id)`` in the runs table.

Items live under their own partition key (``#pending#<run id>``), outside the run's header
and pages, so concurrent deliveries into one run never write the same item and the run's
reads never pass over them. The put is conditional on the item not existing (a repeated id
changes nothing); items are deleted once the run's record took them, and carry the table's
TTL attribute in case the run ends first.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection
from typing import TYPE_CHECKING, Any

from relayflow.adapters.aws import tables as t
from relayflow.adapters.aws.errors import AwsServiceError, error_code, is_aws_error, reraise
from relayflow.core.record import InboxItem

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

PARTITION_PREFIX = "#pending#"
#: Deletes per BatchWriteItem (DynamoDB's limit).
_BATCH = 25
_BATCH_ATTEMPTS = 8


class DynamoDBPendingDeliveries:
    """The :class:`~relayflow.ports.PendingDeliveries` port on the runs table.

    Args:
        table_name: The runs table.
        client_factory: Builds the DynamoDB client on first use.
        keep_ms: How long an item not taken is kept after it was received (the run ended
            before taking it).
    """

    def __init__(
        self, table_name: str, *, client_factory: Callable[[], DynamoDBClient], keep_ms: int
    ) -> None:
        self.table_name = table_name
        self._client_factory = client_factory
        self._client: DynamoDBClient | None = None
        self._keep_ms = keep_ms

    def _db(self) -> DynamoDBClient:
        if self._client is None:
            self._client = self._client_factory()
        return self._client

    @staticmethod
    def _key(run_id: str, item_id: str) -> dict[str, Any]:
        return {t.PK: {"S": PARTITION_PREFIX + run_id}, t.SK: {"S": item_id}}

    def post(self, run_id: str, item: InboxItem) -> bool:
        """Store ``item`` with one conditional put."""
        try:
            self._db().put_item(
                TableName=self.table_name,
                Item={
                    **self._key(run_id, item.id),
                    "item": {"S": json.dumps(item.to_document(), separators=(",", ":"))},
                    t.TTL_ATTRIBUTE: {"N": str((item.received_at + self._keep_ms) // 1000)},
                },
                ConditionExpression="attribute_not_exists(#pk)",
                ExpressionAttributeNames={"#pk": t.PK},
            )
        except Exception as exc:
            if is_aws_error(exc) and error_code(exc) == "ConditionalCheckFailedException":
                return False
            reraise(exc, "storing a delivery")
        return True

    def pending(self, run_id: str) -> list[InboxItem]:
        """Every stored delivery of the run (a consistent query of its partition)."""
        params: dict[str, Any] = {
            "TableName": self.table_name,
            "KeyConditionExpression": "#pk = :pk",
            "ExpressionAttributeNames": {"#pk": t.PK},
            "ExpressionAttributeValues": {":pk": {"S": PARTITION_PREFIX + run_id}},
            "ConsistentRead": True,
        }
        items: list[InboxItem] = []
        while True:
            try:
                page = self._db().query(**params)
            except Exception as exc:
                reraise(exc, "reading stored deliveries")
            for found in page.get("Items", []):
                items.append(InboxItem.model_validate(json.loads(found["item"]["S"])))
            if "LastEvaluatedKey" not in page:
                return items
            params["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def remove(self, run_id: str, item_ids: Collection[str]) -> None:
        """Delete ``item_ids`` in batches (a delete of a missing item changes nothing)."""
        ids = list(dict.fromkeys(item_ids))
        for start in range(0, len(ids), _BATCH):
            requests: list[Any] = [
                {"DeleteRequest": {"Key": self._key(run_id, item_id)}}
                for item_id in ids[start : start + _BATCH]
            ]
            for _ in range(_BATCH_ATTEMPTS):
                try:
                    answer = self._db().batch_write_item(RequestItems={self.table_name: requests})
                except Exception as exc:
                    reraise(exc, "removing stored deliveries")
                requests = list(answer.get("UnprocessedItems", {}).get(self.table_name, []))
                if not requests:
                    break
            else:
                raise AwsServiceError(
                    f"stored deliveries of run {run_id} could not all be removed",
                    aws_code="UnprocessedItems",
                    transient=True,
                )
