"""How a save lays out what it writes: its entries inline in the header item while it stays
within one write unit, else as a page set written before the header; and the conditional
header write itself."""

from __future__ import annotations

import dataclasses
from typing import Any

from relayflow.adapters.aws import attributes, tables
from relayflow.adapters.aws.runstore import _pages
from relayflow.adapters.aws.runstore._header import HeaderCodec
from relayflow.adapters.aws.runstore._snapshot import RunSnapshot
from relayflow.core.record import RunRecord

#: The header item may carry inline entries while it stays within one write unit.
_INLINE_BUDGET = 1024


@dataclasses.dataclass
class Layout:
    """What a save writes besides its header fields: the entries not in a page yet, the page
    set they may become (its id, the set it follows) and the chain it extends."""

    pending: list[bytes]
    prev: str | None
    commit: str
    expires: int | None
    compacting: bool = False
    chain: list[str] = dataclasses.field(default_factory=list)


def lay_out(
    headers: HeaderCodec, record: RunRecord, packed: bytes, new: RunSnapshot, layout: Layout
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The header item and page items that store ``record``: its pending entries inline
    in the header while it stays within one write unit, else as a page set of their own
    (``new`` takes the head, chain and inline entries they give)."""
    new.head, new.chain, new.inline = layout.prev, layout.chain, []
    if not layout.compacting:
        new.inline = layout.pending
        header = headers.item(record, packed, new, layout.expires)
        if not layout.pending or attributes.item_size(header) <= _INLINE_BUDGET:
            return header, []
        new.inline = []
    bodies = _pages.pack_encoded(layout.pending)
    items = _pages.page_items(record.id, layout.commit, layout.prev, bodies, layout.expires)
    new.head = layout.commit
    new.chain = [*layout.chain, *(item[tables.SK]["S"] for item in items)]
    return headers.item(record, packed, new, layout.expires), items


def header_put(
    table_name: str, header: dict[str, Any], *, insert: bool, old: int, marked: bool = False
) -> dict[str, Any]:
    """The ``PutItem`` parameters of a header write: conditional on the run not existing
    (``insert``) or on its stored version being ``old`` and, unless the record saved was
    read with it (``marked``), on no delivery having marked it since."""
    params: dict[str, Any] = {
        "TableName": table_name,
        "Item": header,
        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
    }
    if insert:
        params["ConditionExpression"] = "attribute_not_exists(#pk)"
        params["ExpressionAttributeNames"] = {"#pk": tables.PK}
    else:
        params["ConditionExpression"] = (
            "#v = :v" if marked else "#v = :v AND attribute_not_exists(#m)"
        )
        params["ExpressionAttributeNames"] = {"#v": "version"}
        if not marked:
            params["ExpressionAttributeNames"]["#m"] = tables.DELIVERY_MARK
        params["ExpressionAttributeValues"] = {":v": attributes.n(old)}
    return params
