"""Cheap rollback copies for moto's ``TransactWriteItems``.

moto 5 deep-copies each table a transaction touches, for every item of the transaction, so
that it can put the table back when an item fails. A table only grows in a long test (and
in the local stack), so each transaction costs more than the one before and a test that
finishes a thousand runs spends minutes copying. The copy moto gets here instead shares
every partition of the table with it except those of the items this transaction names,
which are deep copies: the transaction writes nothing else. One copy per table per
transaction is made.
"""

from __future__ import annotations

import copy
import functools
import threading
from collections.abc import Callable
from typing import Any

_transaction = threading.local()


class TransactionCopy:
    """Stands in for the ``copy`` module in moto's DynamoDB models."""

    @staticmethod
    def deepcopy(obj: Any, memo: Any = None) -> Any:
        copies: dict[int, tuple[Any, Any]] | None = getattr(_transaction, "copies", None)
        if copies is None:
            return copy.deepcopy(obj, memo)
        if id(obj) not in copies:
            # The original is kept alive with its copy, so its id cannot be reused meanwhile.
            copies[id(obj)] = (obj, _rollback_copy(obj, _transaction.keys))
        return copies[id(obj)][1]


def _rollback_copy(obj: Any, keys: list[tuple[str, dict[str, Any]]]) -> Any:
    from moto.dynamodb.models.dynamo_type import DynamoType
    from moto.dynamodb.models.table import Table

    if not isinstance(obj, Table):
        return copy.deepcopy(obj)
    table = copy.copy(obj)
    table.items = obj.items.copy()
    for table_name, key in keys:
        hash_value = DynamoType(key[obj.hash_key_attr]) if obj.hash_key_attr in key else None
        if table_name == obj.name and hash_value in table.items:
            table.items[hash_value] = copy.deepcopy(obj.items[hash_value])
    return table


def _keys_named(transact_items: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    """(table, key attributes) of each item of a transaction (a put's whole item holds its
    key)."""
    named: list[tuple[str, dict[str, Any]]] = []
    for item in transact_items:
        for op_type, op in item.items():
            if isinstance(op, dict) and "TableName" in op:
                named.append((op["TableName"], op.get("Item" if op_type == "Put" else "Key", {})))
    return named


def copy_each_table_once(original: Callable[..., None]) -> Callable[..., None]:
    """Wraps ``DynamoDBBackend.transact_write_items`` so its copies are cheap and made once."""

    @functools.wraps(original)
    def transact_write_items(self: Any, transact_items: list[dict[str, Any]]) -> None:
        _transaction.copies = {}
        _transaction.keys = _keys_named(transact_items)
        try:
            original(self, transact_items)
        finally:
            _transaction.copies = None
            _transaction.keys = []

    return transact_write_items
