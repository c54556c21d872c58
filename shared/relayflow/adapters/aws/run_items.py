"""How a run record is laid out in DynamoDB items: one header and one item per growing entry.

A record document is split into a small header (everything but the growing collections) and
"parts": one per journal entry, metadata key, stream chunk, applied id... so that a checkpoint
writes only the parts that changed and no item grows with the run.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

HEADER_SK = "#run"
PART_PREFIX = "p#"
BUNDLE_PREFIX = "b#"
#: Largest item relayflow writes (DynamoDB's limit is 400 KB; keys and attributes add a bit).
ITEM_BUDGET = 350_000
#: Values whose JSON is larger than this go to the payload store from a part item.
VALUE_BUDGET = ITEM_BUDGET - 2_000
_LONG_KEY = 200

# (section code, path in the document) of collections split into one part per entry.
DICT_SECTIONS: dict[str, tuple[str, ...]] = {
    "step": ("journal", "stepResults"),
    "wres": ("journal", "waitpointsResolved"),
    "wreg": ("journal", "waitpointsRegistered"),
    "comp": ("journal", "compensationsRun"),
    "meta": ("journal", "metadataState"),
    "strc": ("journal", "streamsCompleted"),
}
# Append-only lists: one part per position.
LIST_SECTIONS: dict[str, str] = {"chld": "children", "crep": "compensations"}
# Lists trimmed or consumed anywhere: one part per element, keyed by the element (or its
# ``id``), so dropping the oldest entries deletes those parts instead of shifting the rest.
KEYED_SECTIONS: dict[str, tuple[str, str | None]] = {
    "amid": ("appliedMetadataIds", None),
    "seen": ("seenInjectionIds", None),
    "inbx": ("inbox", "id"),
}
STREAM_HEAD = "strh"
STREAM_CHUNK = "strk"

PartId = tuple[str, str]


def encode_json(value: Any) -> str:
    """Compact JSON text of a stored value."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def digest(text: str) -> str:
    """A short content hash deciding whether a part changed."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


def part_sk(part: PartId) -> str:
    """The sort key of a part item (long keys are hashed to stay well under 1 KB)."""
    section, key = part
    if len(key.encode("utf-8")) > _LONG_KEY:
        key = "~" + hashlib.sha256(key.encode("utf-8")).hexdigest()
    return f"{PART_PREFIX}{section}#{key}"


def bundle_sk(version: int, index: int) -> str:
    """The sort key of the ``index``-th bundle item written at ``version``."""
    return f"{BUNDLE_PREFIX}{version:012d}#{index:04d}"


def split_document(doc: dict[str, Any]) -> tuple[dict[str, Any], dict[PartId, str]]:
    """Split a record document into its header document and its parts (as JSON text).

    The header keeps every field but the split collections, which it holds empty.
    """
    header = dict(doc)
    journal = dict(header.get("journal") or {})
    header["journal"] = journal
    parts: dict[PartId, str] = {}
    for section, (_, name) in DICT_SECTIONS.items():
        entries = journal.get(name) or {}
        journal[name] = {}
        for key, value in entries.items():
            parts[(section, str(key))] = encode_json(value)
    for section, name in LIST_SECTIONS.items():
        items = header.get(name) or []
        header[name] = []
        for index, value in enumerate(items):
            parts[(section, f"{index:09d}")] = encode_json(value)
    for section, (name, id_field) in KEYED_SECTIONS.items():
        items = header.get(name) or []
        header[name] = []
        seen: dict[str, int] = {}
        for value in items:
            raw = value.get(id_field) if id_field and isinstance(value, dict) else value
            key = raw if isinstance(raw, str) else encode_json(raw)
            count = seen.get(key, 0)
            seen[key] = count + 1
            parts[(section, key if count == 0 else f"{key}#dup{count}")] = encode_json(value)
    streams = header.get("streams") or {}
    header["streams"] = {}
    for stream_id, chunks in streams.items():
        parts[(STREAM_HEAD, str(stream_id))] = "null"
        for index, chunk in enumerate(chunks):
            parts[(STREAM_CHUNK, encode_json([stream_id, index]))] = encode_json(chunk)
    return header, parts


def join_document(
    header: dict[str, Any], parts: Iterable[tuple[PartId, int, Any]]
) -> dict[str, Any]:
    """Rebuild a record document from its header and ``(part, ordinal, value)`` triples."""
    doc = dict(header)
    journal = dict(doc.get("journal") or {})
    doc["journal"] = journal
    dicts: dict[str, dict[str, Any]] = {section: {} for section in DICT_SECTIONS}
    lists: dict[str, list[tuple[int, Any]]] = {section: [] for section in LIST_SECTIONS}
    keyed: dict[str, list[Any]] = {section: [] for section in KEYED_SECTIONS}
    heads: list[tuple[int, str]] = []
    chunks: dict[str, list[tuple[int, Any]]] = {}
    for (section, key), ordinal, value in sorted(parts, key=lambda p: p[1]):
        if section in dicts:
            dicts[section][key] = value
        elif section in lists:
            lists[section].append((int(key), value))
        elif section in keyed:
            keyed[section].append(value)
        elif section == STREAM_HEAD:
            heads.append((ordinal, key))
        elif section == STREAM_CHUNK:
            stream_id, index = json.loads(key)
            chunks.setdefault(str(stream_id), []).append((int(index), value))
    for section, (_, name) in DICT_SECTIONS.items():
        journal[name] = dicts[section]
    for section, name in LIST_SECTIONS.items():
        doc[name] = [value for _, value in sorted(lists[section], key=lambda p: p[0])]
    for section, (name, _) in KEYED_SECTIONS.items():
        doc[name] = keyed[section]
    streams: dict[str, list[Any]] = {stream_id: [] for _, stream_id in sorted(heads)}
    for stream_id, entries in chunks.items():
        streams[stream_id] = [value for _, value in sorted(entries, key=lambda p: p[0])]
    doc["streams"] = streams
    return doc


@dataclass
class PartState:
    """What the store knows is written for one part."""

    hash: str
    ordinal: int
    ref: str | None = None
    deleted: bool = False


@dataclass
class Snapshot:
    """The stored layout of one run at one version (what a save is diffed against)."""

    version: int
    parts: dict[PartId, PartState] = field(default_factory=dict)
    next_ordinal: int = 0
    bundle_sks: list[str] = field(default_factory=list)


# ---- DynamoDB attribute values and item sizes --------------------------------------------------


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
