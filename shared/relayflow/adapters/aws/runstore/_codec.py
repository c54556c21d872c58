"""How a run record is laid out in DynamoDB: a small header and "parts" stored in pages.

A record splits into its header document (everything but the growing collections) and parts:
one per journal entry, metadata key, stream chunk, applied id... A save writes only the parts
that changed, several to an item (see ``_pages``), so no item grows with the run and a
checkpoint costs about the bytes it adds.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import operator
from collections.abc import Iterable, Iterator
from typing import Any

from relayflow.adapters.aws import attributes
from relayflow.core.record import RunRecord

#: Values whose JSON is larger than this go to the payload store instead of a page.
VALUE_BUDGET = attributes.ITEM_BUDGET - 2_000
#: Header fields whose JSON is larger than this go to the payload store (when there is one):
#: the header is rewritten by every save, a stored reference costs nothing to rewrite.
FIELD_BUDGET = 32 * 1024

#: The section of step entries (each step's journal entry, a branch's and a batch's too).
STEP_SECTION = "step"
# Collections split into one part per entry: (section code, attribute, alias).
DICT_SECTIONS: tuple[tuple[str, str, str], ...] = (
    (STEP_SECTION, "step_results", "stepResults"),
    ("wres", "waitpoints_resolved", "waitpointsResolved"),
    ("wreg", "waitpoints_registered", "waitpointsRegistered"),
    ("comp", "compensations_run", "compensationsRun"),
    ("meta", "metadata_state", "metadataState"),
    ("strc", "streams_completed", "streamsCompleted"),
)
# Append-only lists: one part per position.
LIST_SECTIONS: tuple[tuple[str, str, str], ...] = (
    ("chld", "children", "children"),
    ("crep", "compensations", "compensations"),
)
# Lists trimmed or consumed anywhere: one part per element, keyed by the element (or its
# ``id``), so dropping the oldest entries removes those parts instead of shifting the rest.
KEYED_SECTIONS: tuple[tuple[str, str, str, str | None], ...] = (
    ("amid", "applied_metadata_ids", "appliedMetadataIds", None),
    ("seen", "seen_injection_ids", "seenInjectionIds", None),
    ("inbx", "inbox", "inbox", "id"),
)
STREAM_HEAD = "strh"
STREAM_CHUNK = "strk"
#: The group of both stream sections.
STREAMS = "strm"
_DICT_CODES = frozenset(section for section, _, _ in DICT_SECTIONS)
_LIST_CODES = frozenset(section for section, _, _ in LIST_SECTIONS)
_KEYED_IDS = {section: id_field for section, _, _, id_field in KEYED_SECTIONS}

PartId = tuple[str, str]

#: What the header document leaves out (the parts, and the version, an attribute of its own).
HEADER_EXCLUDE: dict[str, Any] = {
    "version": True,
    "journal": {attr: True for _, attr, _ in DICT_SECTIONS},
    "streams": True,
    **{attr: True for _, attr, _ in LIST_SECTIONS},
    **{attr: True for _, attr, _, _ in KEYED_SECTIONS},
}
#: Header document keys the header item holds as attributes of their own (for the listing
#: indexes and their filters): the document leaves them out and reading takes them from there.
ATTRIBUTE_KEYS: tuple[str, ...] = ("id", "workflowId", "status", "environment", "tags", "startedAt")
#: The record attribute of each header document key.
FIELD_OF_KEY: dict[str, str] = {
    (info.alias or name): name for name, info in RunRecord.model_fields.items()
}


def digest(data: bytes) -> bytes:
    """A short content hash deciding whether a part changed."""
    return hashlib.blake2b(data, digest_size=16).digest()


def header_json(record: RunRecord, skip: Iterable[str] = ()) -> bytes:
    """The header document of ``record`` as JSON, without the top-level keys in ``skip``, the
    ones held as attributes (``ATTRIBUTE_KEYS``) and fields at their default (reading fills
    those in again), so the header item stays small."""
    exclude = dict(HEADER_EXCLUDE)
    for key in (*skip, *ATTRIBUTE_KEYS):
        exclude[FIELD_OF_KEY.get(key, key)] = True
    text = record.model_dump_json(by_alias=True, exclude=exclude, exclude_defaults=True)
    return text.encode("utf-8")


def sources(record: RunRecord) -> Iterator[tuple[str, Any]]:
    """Each group of parts of ``record`` with the collection it comes from.

    A group is a section, or both stream sections (from ``streams``).
    """
    journal = record.journal
    for section, attr, _ in DICT_SECTIONS:
        yield section, getattr(journal, attr)
    for section, attr, _ in LIST_SECTIONS:
        yield section, getattr(record, attr)
    for section, attr, _, _ in KEYED_SECTIONS:
        yield section, getattr(record, attr)
    yield STREAMS, record.streams


def part_path(part: PartId) -> str:
    """A JSON Pointer to the entry ``part`` holds in the record's document."""
    section, key = part
    escaped = key.replace("~", "~0").replace("/", "~1")
    for code, _, alias in DICT_SECTIONS:
        if code == section:
            return f"/journal/{alias}/{escaped}"
    for code, _, alias in LIST_SECTIONS:
        if code == section:
            return f"/{alias}/{escaped}"
    for code, _, alias, _ in KEYED_SECTIONS:
        if code == section:
            return f"/{alias}/{escaped}"
    if section == STREAM_CHUNK:
        stream_id, index = json.loads(key)
        return f"/streams/{str(stream_id).replace('~', '~0').replace('/', '~1')}/{index}"
    return f"/streams/{escaped}"


def group_of(section: str) -> str:
    """The group (see :func:`sources`) a section belongs to."""
    return STREAMS if section in (STREAM_HEAD, STREAM_CHUNK) else section


def same_objects(new: Any, old: Any) -> bool:
    """True when two collections hold the very same objects in the same places.

    Compares identities only (at C speed; lists inside a dict are compared the same way): a
    collection that passes holds nothing new, as entries are replaced, never edited in place.
    """
    if new is old:
        return True
    if len(new) != len(old):
        return False
    if isinstance(new, dict):
        if list(new) != list(old):
            return False
        if all(map(operator.is_, new.values(), old.values())):
            return True
        return all(
            isinstance(a, list) and isinstance(b, list) and same_objects(a, b)
            for a, b in zip(new.values(), old.values(), strict=True)
        )
    return all(map(operator.is_, new, old))


def extends(new: Any, old: Any) -> bool:
    """True when a dict or list of entries starts with exactly the objects of ``old`` (so only
    what follows them can be new)."""
    count = len(old)
    if len(new) < count or not isinstance(new, type(old)):
        return False
    if isinstance(new, dict):
        return list(itertools.islice(new, count)) == list(old) and all(
            map(operator.is_, itertools.islice(new.values(), count), old.values())
        )
    return all(map(operator.is_, itertools.islice(new, count), old))


def tail_parts(group: str, source: Any, start: int) -> Iterator[tuple[PartId, Any]] | None:
    """The parts of a group from its ``start``-th entry on, or None for groups whose part keys
    depend on the entries before (keyed lists, streams)."""
    if group in _DICT_CODES:
        return (
            ((group, str(key)), value)
            for key, value in itertools.islice(source.items(), start, None)
        )
    if group in _LIST_CODES:
        return (
            ((group, f"{index:09d}"), value)
            for index, value in enumerate(itertools.islice(source, start, None), start)
        )
    return None


def group_parts(group: str, source: Any) -> Iterator[tuple[PartId, Any]]:
    """The parts of one group (see :func:`sources`) with the objects they hold."""
    if group in _DICT_CODES:
        for key, value in source.items():
            yield (group, str(key)), value
    elif group in _LIST_CODES:
        for index, value in enumerate(source):
            yield (group, f"{index:09d}"), value
    elif group in _KEYED_IDS:
        id_field = _KEYED_IDS[group]
        seen: dict[str, int] = {}
        for value in source:
            if id_field is None:
                raw = value
            elif isinstance(value, dict):
                raw = value.get(id_field)
            else:
                raw = getattr(value, id_field, None)
            key = raw if isinstance(raw, str) else attributes.encode(raw).decode("utf-8")
            count = seen.get(key, 0)
            seen[key] = count + 1
            yield (group, key if count == 0 else f"{key}#dup{count}"), value
    else:
        for stream_id, chunks in source.items():
            yield (STREAM_HEAD, str(stream_id)), None
            for index, chunk in enumerate(chunks):
                yield (STREAM_CHUNK, attributes.encode_json([stream_id, index])), chunk


def iter_parts(record: RunRecord) -> Iterator[tuple[PartId, Any]]:
    """Every part of ``record`` with the object it holds (not encoded)."""
    for group, source in sources(record):
        yield from group_parts(group, source)


def join_document(header: dict[str, Any], parts: Iterable[tuple[PartId, Any]]) -> dict[str, Any]:
    """Rebuild a record document from its header and ``(part, value)`` pairs in stored order."""
    doc = dict(header)
    journal = dict(doc.get("journal") or {})
    doc["journal"] = journal
    dicts: dict[str, dict[str, Any]] = {section: {} for section, _, _ in DICT_SECTIONS}
    lists: dict[str, list[tuple[int, Any]]] = {section: [] for section, _, _ in LIST_SECTIONS}
    keyed: dict[str, list[Any]] = {section: [] for section, _, _, _ in KEYED_SECTIONS}
    heads: list[str] = []
    chunks: dict[str, list[tuple[int, Any]]] = {}
    for (section, key), value in parts:
        if section in dicts:
            dicts[section][key] = value
        elif section in lists:
            lists[section].append((int(key), value))
        elif section in keyed:
            keyed[section].append(value)
        elif section == STREAM_HEAD:
            heads.append(key)
        elif section == STREAM_CHUNK:
            stream_id, index = json.loads(key)
            chunks.setdefault(str(stream_id), []).append((int(index), value))
    for section, _, alias in DICT_SECTIONS:
        journal[alias] = dicts[section]
    for section, _, alias in LIST_SECTIONS:
        doc[alias] = [value for _, value in sorted(lists[section], key=lambda p: p[0])]
    for section, _, alias, _ in KEYED_SECTIONS:
        doc[alias] = keyed[section]
    streams: dict[str, list[Any]] = {stream_id: [] for stream_id in heads}
    for stream_id, entries in chunks.items():
        streams[stream_id] = [value for _, value in sorted(entries, key=lambda p: p[0])]
    doc["streams"] = streams
    return doc


def detached(record: RunRecord) -> RunRecord:
    """A copy of ``record`` that its holder may change without touching ``record``.

    The header fields are copied deeply and the collections one level deep: their entries
    (journal entries, inbox items, chunks...) and the input and output are shared, as the
    core shares them (a change replaces an entry, never edits it in place).
    """
    journal = record.journal
    shell = record.model_copy(
        update={
            "journal": journal.model_copy(update={attr: {} for _, attr, _ in DICT_SECTIONS}),
            "input": None,
            "output": None,
            "streams": {},
            **{attr: [] for _, attr, _ in LIST_SECTIONS},
            **{attr: [] for _, attr, _, _ in KEYED_SECTIONS},
        }
    ).model_copy(deep=True)
    shell.journal = shell.journal.model_copy(
        update={attr: dict(getattr(journal, attr)) for _, attr, _ in DICT_SECTIONS}
    )
    return shell.model_copy(
        update={
            "input": record.input,
            "output": record.output,
            "streams": {key: list(chunks) for key, chunks in record.streams.items()},
            **{attr: list(getattr(record, attr)) for _, attr, _ in LIST_SECTIONS},
            **{attr: list(getattr(record, attr)) for _, attr, _, _ in KEYED_SECTIONS},
        }
    )


# ---- DynamoDB attribute values and item sizes --------------------------------------------------
