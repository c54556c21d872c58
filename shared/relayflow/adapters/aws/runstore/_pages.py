"""Pages: the items holding a run's parts, several to an item, compressed.

A save's new parts first ride in the header item itself (its inline entries) while the header stays
within one write unit; the save that would push it past that moves those and its own
parts into a page set, so a page is written once per header-full of entries, not per save.

Each save that changes parts first writes a "page set" (one or more page items) under a
commit id of its own, then the header that names it (``head``). Every set names the one
before it (``prev``), so walking back from the header reaches exactly the committed sets;
anything else in the partition (a write that lost its race or died before its header) is
ignored. A set without ``prev`` holds every live part (written when a run starts paging or
is compacted).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from relayflow.adapters.aws import attributes, branch_ends, compression, tables
from relayflow.adapters.aws.runstore import _codec, _keys

#: Uncompressed bytes of entries packed into one page (a larger single entry has its own).
PAGE_BUDGET = 256 * 1024
#: The framing an entry adds to a page besides its value (brackets, quotes, commas).
ENTRY_FRAMING = 10

#: A part written in a page: its JSON value, or a payload-store reference, or neither when
#: the part was removed.
Written = tuple[_codec.PartId, bytes | None, str | None]


def entry_cost(part: _codec.PartId, size: int) -> int:
    """Bytes a part of ``size`` bytes of JSON takes in a page (before compression)."""
    return size + len(part[0]) + len(part[1]) + ENTRY_FRAMING


def ref_size(ref: str) -> int:
    """Bytes a payload-store reference takes in a page in place of a value."""
    return len(ref) + 8


def encode_entry(part: _codec.PartId, data: bytes | None, ref: str | None) -> bytes:
    """One written part as the JSON array a page (or the header's inline entries) holds."""
    head = attributes.encode_json(list(part))[:-1].encode("utf-8")
    if ref is not None:
        return head + b",null," + attributes.encode_json(ref).encode("utf-8") + b"]"
    if data is None:
        return head + b"]"
    return head + b"," + data + b"]"


def encode_entries(written: Sequence[Written]) -> list[bytes]:
    """Written parts as page entries, in order, each branch end its last step's entry can
    carry folded into it (see :mod:`relayflow.adapters.aws.branch_ends`)."""

    def key(entry: Written) -> str | None:
        (section, part_key), _, _ = entry
        return part_key if section == _codec.STEP_SECTION else None

    def value(entry: Written) -> dict[str, Any] | None:
        data = entry[1]
        if data is None or not data.startswith(b"{"):
            return None
        found = json.loads(data)
        return found if isinstance(found, dict) else None

    def carrying(entry: Written, end: dict[str, Any]) -> Written:
        part, data, _ = entry
        assert data is not None  # value() found a JSON object in it
        carried = f"{attributes.encode_json(branch_ends.END)}:{attributes.encode_json(end)}"
        joint = b"," if data != b"{}" else b""
        return part, data[:-1] + joint + carried.encode("utf-8") + b"}", None

    folded = branch_ends.fold(written, key, value, carrying)
    return [encode_entry(part, data, ref) for part, data, ref in folded]


def body(encoded: Iterable[bytes]) -> bytes:
    """The JSON list of encoded entries (a page body, or the header's inline entries)."""
    return b"[" + b",".join(encoded) + b"]"


def pack_encoded(entries: Iterable[bytes]) -> list[bytes]:
    """The uncompressed bodies of the pages holding the encoded ``entries``, in order."""
    bodies: list[bytes] = []
    current: list[bytes] = []
    size = 0
    for encoded in entries:
        if current and size + len(encoded) + 1 > PAGE_BUDGET:
            bodies.append(body(current))
            current, size = [], 0
        current.append(encoded)
        size += len(encoded) + 1
    if current:
        bodies.append(body(current))
    return bodies


def page_items(
    run_id: str,
    commit: str,
    prev: str | None,
    bodies: list[bytes],
    expires: int | None,
) -> list[dict[str, Any]]:
    """The page items of one set (each names the set's size; the first names ``prev``)."""
    items: list[dict[str, Any]] = []
    for index, body in enumerate(bodies):
        item: dict[str, Any] = {
            tables.PK: attributes.s(run_id),
            tables.SK: attributes.s(_keys.page_sk(commit, index)),
            "n": attributes.n(len(bodies)),
            "z": {"B": compression.pack(body)},
        }
        if index == 0 and prev is not None:
            item["prev"] = attributes.s(prev)
        if expires is not None:
            item[tables.TTL_ATTRIBUTE] = attributes.n(expires)
        items.append(item)
    return items


@dataclass(frozen=True)
class Decoded:
    """A run's committed page sets read back: its parts in stored order and what they cost.

    Attributes:
        parts: Each live part's value (parsed JSON) and payload reference, in stored order.
        chain: The sort keys of the committed page items, oldest set first.
        dead: Sort keys of page items no header reaches any more (safe to delete).
        stored: Bytes of entries on the chain, superseded ones included (uncompressed).
    """

    parts: dict[_codec.PartId, tuple[Any, str | None]]
    chain: list[str]
    dead: list[str]
    stored: int


def apply(parts: dict[_codec.PartId, tuple[Any, str | None]], data: bytes) -> None:
    """Apply the entries of a page body (or the header's inline entries) to ``parts``, in order."""
    for entry in json.loads(data):
        part = (entry[0], entry[1])
        if len(entry) == 2:
            parts.pop(part, None)
        elif len(entry) == 4:
            parts[part] = (None, entry[3])
        elif part[0] == _codec.STEP_SECTION:
            for key, value in branch_ends.unfold(part[1], entry[2]):
                parts[(part[0], key)] = (value, None)
        else:
            parts[part] = (entry[2], None)


class IncompleteChainError(Exception):
    """A page set the header reaches is missing (the run changed while it was read)."""


def decode(
    version: int,
    head: str | None,
    pages: Mapping[str, Mapping[str, Any]],
    inline: bytes | None = None,
) -> Decoded:
    """The parts of the run whose header is at ``version`` with ``head``, from its page items.

    Args:
        version: The header's version.
        head: The header's newest commit id (None when the run has no pages).
        pages: Page items by sort key (every ``g#`` item of the partition).
        inline: The header's inline entries (compressed, newer than every page), if any.
    """
    sets: dict[str, dict[int, Mapping[str, Any]]] = {}
    for sk, item in pages.items():
        written_by, position = sk[len(_keys.PAGE_PREFIX) :].rsplit("#", 1)
        sets.setdefault(written_by, {})[int(position)] = item
    newest_first: list[str] = []
    following = head
    while following is not None:
        found = sets.get(following)
        if not found or 0 not in found or len(found) != int(found[0]["n"]["N"]):
            raise IncompleteChainError(following)
        newest_first.append(following)
        following = found[0]["prev"]["S"] if "prev" in found[0] else None
    chain_commits = set(newest_first)
    parts: dict[_codec.PartId, tuple[Any, str | None]] = {}
    chain: list[str] = []
    stored = 0
    for commit in reversed(newest_first):
        found = sets[commit]
        for index in range(len(found)):
            chain.append(_keys.page_sk(commit, index))
            data = compression.unpack(found[index]["z"]["B"])
            stored += len(data)
            apply(parts, data)
    if inline is not None:
        data = compression.unpack(inline)
        stored += len(data)
        apply(parts, data)
    dead = [
        _keys.page_sk(c, i)
        for c, found in sets.items()
        if c not in chain_commits and _keys.commit_version(c) <= version
        for i in found
    ]
    return Decoded(parts=parts, chain=chain, dead=dead, stored=stored)


def entries_of(blob: bytes) -> list[bytes]:
    """The encoded entries of a compressed body (the header's inline entries)."""
    return [
        attributes.encode_json(entry).encode("utf-8")
        for entry in json.loads(compression.unpack(blob))
    ]
