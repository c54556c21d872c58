"""What the DynamoDB flow-control stores share: their partitions in the runs table, the
client, and reading the outcome of a refused conditional write or transaction."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from relayflow.adapters.aws import tables as t
from relayflow.adapters.aws.errors import AwsServiceError, error_code, is_aws_error
from relayflow.flow.ports import SlotScope

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

#: Attempts of one operation that keeps losing races before it gives up (transiently).
MAX_ATTEMPTS = 200


def scope_partition(prefix: str, scope: SlotScope) -> str:
    """The partition of a (workflow, key) scope: the workflow id's length keeps ids and keys
    that contain ``#`` from colliding."""
    return f"{prefix}{len(scope.workflow_id)}:{scope.workflow_id}#{scope.key}"


def item_key(partition: str, sort_key: str) -> dict[str, Any]:
    """The table key of one item."""
    return {t.PK: {"S": partition}, t.SK: {"S": sort_key}}


def refused(exc: BaseException) -> bool:
    """A conditional write whose condition did not hold."""
    return is_aws_error(exc) and error_code(exc) == "ConditionalCheckFailedException"


def cancellation_codes(exc: BaseException) -> list[str] | None:
    """The per-item reasons of a cancelled transaction (``None`` when it was not one)."""
    if not is_aws_error(exc) or error_code(exc) != "TransactionCanceledException":
        return None
    reasons = getattr(exc, "response", {}).get("CancellationReasons", [])
    return [str(reason.get("Code", "None")) for reason in reasons]


def lost_too_often(what: str) -> AwsServiceError:
    """The error of an operation that lost :data:`MAX_ATTEMPTS` races in a row (retry later)."""
    return AwsServiceError(
        f"{what} lost {MAX_ATTEMPTS} races in a row", aws_code="Contention", transient=True
    )


def unchanged_since(version: int) -> dict[str, Any]:
    """The condition of a write that expects the item at ``version`` (0: no item yet)."""
    if version == 0:
        return {"ConditionExpression": "attribute_not_exists(sk)"}
    return {
        "ConditionExpression": "v = :v",
        "ExpressionAttributeValues": {":v": {"N": str(version)}},
    }


class FlowTable:
    """A store in the runs table, with its client made on first use."""

    def __init__(self, table_name: str, *, client_factory: Callable[[], DynamoDBClient]) -> None:
        self.table_name = table_name
        self._client_factory = client_factory
        self._client: DynamoDBClient | None = None

    def _db(self) -> DynamoDBClient:
        if self._client is None:
            self._client = self._client_factory()
        return self._client

    def _get(self, key: dict[str, Any]) -> dict[str, Any] | None:
        found = self._db().get_item(TableName=self.table_name, Key=key, ConsistentRead=True)
        item: dict[str, Any] | None = found.get("Item")
        return item

    def _put_next_version(
        self, table_key: dict[str, Any], fields: dict[str, Any], version: int
    ) -> bool:
        """Write the item as version ``version + 1`` if it is still at ``version``; False when
        another writer moved it first (the caller reads again)."""
        try:
            self._db().put_item(
                TableName=self.table_name,
                Item={**table_key, **fields, "v": {"N": str(version + 1)}},
                **unchanged_since(version),
            )
        except Exception as exc:
            if refused(exc):
                return False
            raise
        return True
