"""What the DynamoDB run store remembers of a stored run, and how a new record differs from it.

The state of a version is what the next save is diffed against: each part's object, content
hash and size, the committed page sets, and the header fields held in the payload store. A
part whose object is the one stored last is unchanged without being encoded again (entries
are replaced, never changed in place), so a save encodes only what is new.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from relayflow.adapters.aws import attributes
from relayflow.adapters.aws.runstore import _codec, _pages
from relayflow.core.record import TERMINAL_STATUSES, RunRecord


@dataclass(slots=True)
class StoredPart:
    """One stored part: the object last written or read, its content hash, and the bytes its
    value takes in a page (its JSON, or its payload-store reference)."""

    obj: Any
    digest: bytes
    size: int
    ref: str | None = None


@dataclass(slots=True)
class StoredField:
    """A header field held in the payload store."""

    obj: Any
    digest: bytes
    ref: str


@dataclass
class RunSnapshot:
    """A run as stored at one version (see the module docstring).

    Attributes:
        version: The stored version (0 before the insert).
        record: The stored record, private to the store (hand out ``detached`` copies).
        parts: Every live part in stored order, by group (see ``_codec.sources``).
        head: The newest committed page set, or None.
        chain: Sort keys of the committed page items, oldest first.
        stored: Uncompressed bytes of entries on the chain (superseded ones included).
        live: Page bytes the live parts take (uncompressed).
        dead: Sort keys of page items no header reaches any more.
        fields: Header fields held in the payload store, by document key.
        expiry_pending: The run ended but its pages may still lack their expiry.
        wake_index: The wake time the stored header gives the sweeper's index (None: none).
        inline: Parts held in the header item, newer than every page (encoded page entries).
    """

    version: int
    record: RunRecord | None = None
    parts: dict[str, dict[_codec.PartId, StoredPart]] = field(default_factory=dict)
    head: str | None = None
    chain: list[str] = field(default_factory=list)
    stored: int = 0
    live: int = 0
    dead: list[str] = field(default_factory=list)
    fields: dict[str, StoredField] = field(default_factory=dict)
    expiry_pending: bool = False
    wake_index: int | None = None
    inline: list[bytes] = field(default_factory=list)

    @property
    def terminal(self) -> bool:
        """True when the stored run has ended."""
        return self.record is not None and self.record.status in TERMINAL_STATUSES


@dataclass
class Diff:
    """How a record differs from a stored state.

    Attributes:
        parts: The record's parts by group, in the order they are stored (old ones first).
        written: Parts to write (new or changed, with their JSON or reference), in order.
        removed: Parts the record no longer has.
        live: Page bytes the record's parts take (uncompressed).
    """

    parts: dict[str, dict[_codec.PartId, StoredPart]]
    written: list[_pages.Written]
    removed: list[_codec.PartId]
    live: int


def diff(
    record: RunRecord, old: RunSnapshot, offload: Callable[[_codec.PartId, bytes], str]
) -> Diff:
    """Compare ``record`` with ``old``; parts too large for a page go through ``offload``.

    A collection holding the very objects stored last is unchanged without a look at its
    parts; otherwise only parts whose object is not the stored one are encoded, and an equal
    encoding counts as unchanged.
    """
    parts: dict[str, dict[_codec.PartId, StoredPart]] = {}
    written: list[_pages.Written] = []
    removed: list[_codec.PartId] = []
    live = old.live
    stored_sources = dict(_codec.sources(old.record)) if old.record is not None else {}
    for group, source in _codec.sources(record):
        known = old.parts.get(group, {})
        if group in stored_sources and _codec.same_objects(source, stored_sources[group]):
            if known:
                parts[group] = known
            continue
        current: dict[_codec.PartId, StoredPart] = {}
        added: list[_codec.PartId] = []
        entries = None
        if group in stored_sources and _codec.extends(source, stored_sources[group]):
            entries = _codec.tail_parts(group, source, len(stored_sources[group]))
        if entries is not None:
            # Entries appended after the stored ones: only those are looked at.
            current = dict(known)
            known = {}
        else:
            entries = _codec.group_parts(group, source)
        for part, obj in entries:
            stored = known.get(part)
            if stored is not None and stored.obj is obj:
                current[part] = stored
                continue
            data = attributes.encode(obj)
            hashed = _codec.digest(data)
            if stored is not None and stored.digest == hashed:
                current[part] = StoredPart(obj, hashed, stored.size, stored.ref)
                continue
            if stored is None:
                added.append(part)
            else:
                live -= _pages.entry_cost(part, stored.size)
            if len(data) > _codec.VALUE_BUDGET:
                ref = offload(part, data)
                current[part] = StoredPart(obj, hashed, _pages.ref_size(ref), ref)
                written.append((part, None, ref))
            else:
                current[part] = StoredPart(obj, hashed, len(data))
                written.append((part, data, None))
            live += _pages.entry_cost(part, current[part].size)
        if known:
            gone = [part for part in known if part not in current]
            live -= sum(_pages.entry_cost(part, known[part].size) for part in gone)
            removed.extend(gone)
            # Parts keep the place they were first stored at; new ones follow in record order.
            current = {
                **{part: current[part] for part in known if part in current},
                **{part: current[part] for part in added},
            }
        if current:
            parts[group] = current
    return Diff(parts=parts, written=written, removed=removed, live=live)
