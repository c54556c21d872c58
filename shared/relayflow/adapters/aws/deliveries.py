"""DynamoDB delivery log: one item per ``(scope, key)`` in the runs table, written with a
condition, so a delivery id costs one conditional ``PutItem`` however many came before it.

Items live under their own partition key (``#delivery#<scope>``), outside the run's header
and journal items, and carry the table's TTL attribute so they expire with the retention of
the run they belong to.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from relayflow.adapters.aws import tables as t
from relayflow.adapters.aws.errors import error_code, is_aws_error, reraise
from relayflow.ports import DeliveryClaim, DeliveryEntry

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

    from relayflow.config import Settings

PARTITION_PREFIX = "#delivery#"


class DynamoDBDeliveryLog:
    """The :class:`~relayflow.ports.DeliveryLog` port on the runs table.

    Args:
        table_name: The runs table.
        client_factory: Builds the DynamoDB client on first use.
    """

    def __init__(self, table_name: str, *, client_factory: Callable[[], DynamoDBClient]) -> None:
        self.table_name = table_name
        self._client_factory = client_factory
        self._client: DynamoDBClient | None = None

    @classmethod
    def from_settings(
        cls, settings: Settings, *, client_factory: Callable[[], DynamoDBClient]
    ) -> DynamoDBDeliveryLog:
        """A log on ``RELAYFLOW_TABLE_NAME``."""
        return cls(settings.require("table_name"), client_factory=client_factory)

    def _db(self) -> DynamoDBClient:
        if self._client is None:
            self._client = self._client_factory()
        return self._client

    @staticmethod
    def _key(scope: str, key: str) -> dict[str, Any]:
        return {t.PK: {"S": PARTITION_PREFIX + scope}, t.SK: {"S": key}}

    def claim(
        self,
        scope: str,
        key: str,
        fingerprint: str,
        *,
        now_ms: int,
        hold_ms: int,
        expires_at: int | None,
    ) -> DeliveryClaim:
        """Take ``(scope, key)`` with one conditional put (see the port)."""
        item: dict[str, Any] = {
            **self._key(scope, key),
            "fp": {"S": fingerprint},
            "heldUntil": {"N": str(now_ms + hold_ms)},
        }
        if expires_at is not None:
            item[t.TTL_ATTRIBUTE] = {"N": str(expires_at // 1000)}
        try:
            self._db().put_item(
                TableName=self.table_name,
                Item=item,
                ConditionExpression=(
                    "attribute_not_exists(#pk) OR "
                    "(attribute_not_exists(#answer) AND #held < :now AND #fp = :fp)"
                ),
                ExpressionAttributeNames={
                    "#pk": t.PK,
                    "#answer": "answer",
                    "#held": "heldUntil",
                    "#fp": "fp",
                },
                ExpressionAttributeValues={
                    ":now": {"N": str(now_ms)},
                    ":fp": {"S": fingerprint},
                },
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except Exception as exc:
            if is_aws_error(exc) and error_code(exc) == "ConditionalCheckFailedException":
                old = getattr(exc, "response", {}).get("Item")
                if not old:
                    old = self._get(scope, key)
                if old:
                    return DeliveryClaim(won=False, existing=_entry(old))
                # The entry vanished between the refusal and the read (it expired): retry.
                return self.claim(
                    scope,
                    key,
                    fingerprint,
                    now_ms=now_ms,
                    hold_ms=hold_ms,
                    expires_at=expires_at,
                )
            reraise(exc, "claiming a delivery id")
        return DeliveryClaim(won=True)

    def record(
        self,
        scope: str,
        key: str,
        fingerprint: str,
        answer: Mapping[str, Any],
        *,
        lifelong: bool = False,
    ) -> None:
        """Store the first answer, only if none is stored and the fingerprint is ours.

        A lifelong claim is written again whole with its answer while it holds nothing else
        (no expiry yet): a conditional put costs what an update does on DynamoDB and less
        on moto. A claim that has more (its run ended and stamped it) is updated instead.
        """
        encoded = {"S": json.dumps(dict(answer), separators=(",", ":"))}
        if lifelong and self._put_answered(scope, key, fingerprint, encoded):
            return
        try:
            self._db().update_item(
                TableName=self.table_name,
                Key=self._key(scope, key),
                UpdateExpression="SET #answer = :answer, #held = :zero",
                ConditionExpression="attribute_not_exists(#answer) AND #fp = :fp",
                ExpressionAttributeNames={"#answer": "answer", "#held": "heldUntil", "#fp": "fp"},
                ExpressionAttributeValues={
                    ":answer": encoded,
                    ":zero": {"N": "0"},
                    ":fp": {"S": fingerprint},
                },
            )
        except Exception as exc:
            if is_aws_error(exc) and error_code(exc) == "ConditionalCheckFailedException":
                return
            reraise(exc, "recording a delivery answer")

    def _put_answered(self, scope: str, key: str, fingerprint: str, answer: dict[str, str]) -> bool:
        """The answered entry in place of an unanswered, unexpiring claim of ours; False when
        the claim is not that (answered, not ours, gone or stamped with an expiry)."""
        try:
            self._db().put_item(
                TableName=self.table_name,
                Item={
                    **self._key(scope, key),
                    "fp": {"S": fingerprint},
                    "heldUntil": {"N": "0"},
                    "answer": answer,
                },
                ConditionExpression=(
                    "attribute_not_exists(#answer) AND #fp = :fp AND attribute_not_exists(#ttl)"
                ),
                ExpressionAttributeNames={
                    "#answer": "answer",
                    "#fp": "fp",
                    "#ttl": t.TTL_ATTRIBUTE,
                },
                ExpressionAttributeValues={":fp": {"S": fingerprint}},
            )
        except Exception as exc:
            if is_aws_error(exc) and error_code(exc) == "ConditionalCheckFailedException":
                return False
            reraise(exc, "recording a delivery answer")
        return True

    def release(self, scope: str, key: str, fingerprint: str) -> None:
        """Delete an unanswered claim of ours."""
        try:
            self._db().delete_item(
                TableName=self.table_name,
                Key=self._key(scope, key),
                ConditionExpression="attribute_not_exists(#answer) AND #fp = :fp",
                ExpressionAttributeNames={"#answer": "answer", "#fp": "fp"},
                ExpressionAttributeValues={":fp": {"S": fingerprint}},
            )
        except Exception as exc:
            if is_aws_error(exc) and error_code(exc) == "ConditionalCheckFailedException":
                return
            reraise(exc, "releasing a delivery id")

    def _get(self, scope: str, key: str) -> dict[str, Any] | None:
        try:
            answer = self._db().get_item(
                TableName=self.table_name, Key=self._key(scope, key), ConsistentRead=True
            )
        except Exception as exc:
            reraise(exc, "reading a delivery id")
        item = answer.get("Item")
        return dict(item) if item else None


def _entry(item: Mapping[str, Any]) -> DeliveryEntry:
    answer = item.get("answer", {}).get("S")
    return DeliveryEntry(
        fingerprint=str(item.get("fp", {}).get("S", "")),
        answer=json.loads(answer) if isinstance(answer, str) else None,
        held_until=int(item.get("heldUntil", {}).get("N", "0")),
    )
