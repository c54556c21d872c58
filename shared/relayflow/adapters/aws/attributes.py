"""DynamoDB attribute values, item sizes as DynamoDB bills them, and the JSON of stored values.

Shared by every adapter that writes items to the runs table (the run store, the checkpoint
log, deployment manifests).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

import pydantic_core
from pydantic import BaseModel

#: Largest item relayflow writes (DynamoDB's limit is 400 KB; keys and attributes add a bit).
ITEM_BUDGET = 350_000


def encode(value: Any) -> bytes:
    """Compact JSON of a stored value (models by alias, without the fields at their default,
    which reading fills in again), as UTF-8."""
    if isinstance(value, BaseModel):
        return value.__pydantic_serializer__.to_json(value, by_alias=True, exclude_defaults=True)
    return pydantic_core.to_json(value, by_alias=True)


def encode_json(value: Any) -> str:
    """Compact JSON text of a plain JSON value."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def s(value: str) -> dict[str, Any]:
    """A string attribute value."""
    return {"S": value}


def n(value: int) -> dict[str, Any]:
    """A number attribute value."""
    return {"N": str(value)}


def attribute_size(value: Mapping[str, Any]) -> int:
    """The size DynamoDB bills for one attribute value (AWS's documented rules)."""
    ((kind, inner),) = value.items()
    if kind == "S":
        return len(str(inner).encode("utf-8"))
    if kind == "N":
        digits = Decimal(str(inner)).normalize().as_tuple().digits
        return (len(digits) + 1) // 2 + 1
    if kind == "B":
        return len(inner)
    if kind in ("BOOL", "NULL"):
        return 1
    if kind == "L":
        return 3 + sum(1 + attribute_size(v) for v in inner)
    if kind == "M":
        return 3 + sum(1 + len(k.encode("utf-8")) + attribute_size(v) for k, v in inner.items())
    if kind in ("SS", "NS", "BS"):
        return sum(attribute_size({kind[0]: v}) for v in inner)
    raise ValueError(f"unknown attribute type {kind}")


def item_size(item: Mapping[str, Mapping[str, Any]]) -> int:
    """The size of an item in bytes as DynamoDB counts it (names plus values)."""
    return sum(len(name.encode("utf-8")) + attribute_size(value) for name, value in item.items())


def write_units(item: Mapping[str, Mapping[str, Any]], *, transactional: bool) -> int:
    """Write capacity units of writing ``item``: 1 per KB started, doubled in a transaction."""
    units = max(1, -(-item_size(item) // 1024))
    return units * 2 if transactional else units
