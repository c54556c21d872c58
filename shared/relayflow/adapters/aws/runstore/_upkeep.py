"""The run store's item chores: writing page items, removing unreferenced ones, and stamping
the expiry on a finished run's pages (once, by the save that ends the run).

Removal and stamping are best effort: a failure leaves items no header reaches (ignored by
readers, removed by a later save) or a run marked as still needing its expiry (finished by
the next reader).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from relayflow.adapters.aws import attributes, tables
from relayflow.adapters.aws.deliveries import PARTITION_PREFIX as DELIVERY_PREFIX
from relayflow.adapters.aws.errors import AwsServiceError, error_code, is_aws_error, reraise
from relayflow.adapters.aws.runstore import _keys
from relayflow.deliveries import run_scope

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

_log = logging.getLogger(__name__)
_BATCH = 25
_BATCH_ROUNDS = 8


class RunUpkeep:
    """Page writes, deletions and expiry stamps for one runs table.

    Args:
        table_name: The runs table.
        client: Returns the DynamoDB client.
    """

    def __init__(self, table_name: str, client: Callable[[], DynamoDBClient]) -> None:
        self.table_name = table_name
        self._db = client

    def put_pages(self, run_id: str, items: list[dict[str, Any]]) -> None:
        """Write page items (plain writes: no header reaches them until one is written).

        Always a ``BatchWriteItem``, even for one item, so that a run's header is the only
        item ever written with ``PutItem``.
        """
        try:
            self._batch(run_id, _puts(items))
        except Exception as exc:
            reraise(exc, f"writing run {run_id}")

    def page_requests(self, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The ``BatchWriteItem`` parameters :meth:`put_pages` sends for ``items`` (when
        DynamoDB processes each whole), for pricing them before they are sent."""
        puts = _puts(items)
        return [
            {"RequestItems": {self.table_name: puts[start : start + _BATCH]}}
            for start in range(0, len(puts), _BATCH)
        ]

    def delete(self, run_id: str, sort_keys: list[str]) -> None:
        """Delete page items no header reaches (best effort)."""
        if not sort_keys:
            return
        requests = [
            {
                "DeleteRequest": {
                    "Key": {tables.PK: attributes.s(run_id), tables.SK: attributes.s(sk)}
                }
            }
            for sk in sort_keys
        ]
        try:
            self._batch(run_id, requests)
        except Exception as exc:
            if not (is_aws_error(exc) or isinstance(exc, AwsServiceError)):
                raise
            _log.warning("could not delete unused items of run %s: %s", run_id, exc)

    def stamp(self, run_id: str, expires: int, *, deliveries: bool = True) -> bool:
        """Set the TTL on every page item of the run, and (with ``deliveries``) on every
        delivery id it logged, that lacks one; False if it failed.

        Items are written again whole with their TTL, 25 to a request: it costs the same
        write units as updating each one, in a twenty-fifth of the requests. A finished run's
        pages never change, so rewriting one can only repeat what it holds; its delivery ids
        are kept without expiry while it lives, so they are remembered for its whole life.
        """
        try:
            self._stamp(run_id, attributes.s(run_id), _keys.PAGE_PREFIX, expires)
            if deliveries:
                partition = attributes.s(DELIVERY_PREFIX + run_scope(run_id))
                self._stamp(run_id, partition, None, expires)
        except Exception as exc:
            if not (is_aws_error(exc) or isinstance(exc, AwsServiceError)):
                raise
            _log.warning("could not set the expiry of every item of run %s: %s", run_id, exc)
            return False
        return True

    def unstamp(self, run_id: str) -> None:
        """Remove the TTL from every page item and delivery id of a run that ended and lives
        again (a redrive), so that nothing of it expires while it runs.

        Raises:
            AwsServiceError: DynamoDB failed (the redrive is retried; repeating is safe).
        """
        try:
            self._stamp(run_id, attributes.s(run_id), _keys.PAGE_PREFIX, None)
            partition = attributes.s(DELIVERY_PREFIX + run_scope(run_id))
            self._stamp(run_id, partition, None, None)
        except Exception as exc:
            reraise(exc, f"reviving run {run_id}")

    def _stamp(
        self, run_id: str, pk: dict[str, Any], prefix: str | None, expires: int | None
    ) -> None:
        """Give every item of the partition (under ``prefix``) without a TTL the TTL
        ``expires``; with None, take the TTL off every item that has one."""
        params: dict[str, Any] = {
            "TableName": self.table_name,
            "KeyConditionExpression": "#pk = :pk",
            "FilterExpression": f"attribute_{'not_' if expires is not None else ''}exists(#ttl)",
            "ExpressionAttributeNames": {"#pk": tables.PK, "#ttl": tables.TTL_ATTRIBUTE},
            "ExpressionAttributeValues": {":pk": pk},
            "ConsistentRead": True,
        }
        if prefix is not None:
            params["KeyConditionExpression"] += " AND begins_with(#sk, :prefix)"
            params["ExpressionAttributeNames"]["#sk"] = tables.SK
            params["ExpressionAttributeValues"][":prefix"] = attributes.s(prefix)
        while True:
            page = self._db().query(**params)
            stamped = [
                {"PutRequest": {"Item": _with_ttl(item, expires)}} for item in page.get("Items", [])
            ]
            self._batch(run_id, stamped)
            if "LastEvaluatedKey" not in page:
                return
            params["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def clear_expiry_mark(self, run_id: str, version: int) -> None:
        """Note on the header that its run's pages all carry their expiry (best effort)."""
        try:
            self._update_header(run_id, version, "REMOVE #a", "xp")
        except Exception as exc:
            if not is_aws_error(exc):
                raise
            _log.warning("could not clear the expiry mark of run %s: %s", run_id, exc)

    def mark_delivery(self, run_id: str, version: int) -> bool:
        """Set the delivery mark on the header if it is at ``version`` (which stays); False
        when it is at another."""
        try:
            return self._update_header(run_id, version, "SET #a = :t", tables.DELIVERY_MARK)
        except Exception as exc:
            reraise(exc, "marking run " + run_id)

    def _update_header(self, run_id: str, version: int, update: str, attribute: str) -> bool:
        """One ``UpdateItem`` of the header's ``attribute`` (``#a`` in ``update``, ``:t``
        true), conditional on its version; False when the version is another."""
        params: dict[str, Any] = {
            "TableName": self.table_name,
            "Key": {tables.PK: attributes.s(run_id), tables.SK: attributes.s(_keys.HEADER_SK)},
            "UpdateExpression": update,
            "ConditionExpression": "#v = :v",
            "ExpressionAttributeNames": {"#a": attribute, "#v": "version"},
            "ExpressionAttributeValues": {":v": attributes.n(version)},
        }
        if ":t" in update:
            params["ExpressionAttributeValues"][":t"] = {"BOOL": True}
        try:
            self._db().update_item(**params)
        except Exception as exc:
            if is_aws_error(exc) and error_code(exc) == "ConditionalCheckFailedException":
                return False
            raise
        return True

    def _batch(self, run_id: str, requests: list[dict[str, Any]]) -> None:
        for start in range(0, len(requests), _BATCH):
            pending: dict[str, Any] = {self.table_name: requests[start : start + _BATCH]}
            for _ in range(_BATCH_ROUNDS):
                answer = self._db().batch_write_item(RequestItems=pending)
                pending = dict(answer.get("UnprocessedItems") or {})
                if not pending:
                    break
            else:
                raise AwsServiceError(
                    f"DynamoDB left items of run {run_id} unwritten after {_BATCH_ROUNDS} rounds",
                    aws_code="UnprocessedItems",
                    transient=True,
                )


def _puts(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"PutRequest": {"Item": item}} for item in items]


def _with_ttl(item: dict[str, Any], expires: int | None) -> dict[str, Any]:
    if expires is None:
        return {k: v for k, v in item.items() if k != tables.TTL_ATTRIBUTE}
    return {**item, tables.TTL_ATTRIBUTE: attributes.n(expires)}
