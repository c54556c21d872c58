"""The event router: which filters of a manifest an envelope triggers, with the input and the
idempotency key of each match. Pure; it never raises, whatever the envelope or the manifest.

Filters are indexed by event type once per manifest, so routing cost does not grow with
filters for other event types.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from relayflow.events.input_mapper import project_input
from relayflow.events.jsvalue import MISSING, is_number, js_to_string, to_float
from relayflow.events.predicate import evaluate_predicate

__all__ = ["FilterIndex", "index_filters", "route_event", "run_id_for"]

_CACHE_SIZE = 64


def run_id_for(workflow_id: Any, idempotency_key: Any) -> str:
    """The deterministic run id of a keyed trigger: ``idem-<workflowId>-<key>`` (no escaping)."""
    return f"idem-{js_to_string(workflow_id)}-{js_to_string(idempotency_key)}"


def _type_key(value: object) -> object:
    """A dict key under which ``===``-equal event types meet (strings, and numbers as doubles)."""
    if isinstance(value, str):
        return value
    if is_number(value):
        return ("number", to_float(value))  # type: ignore[arg-type]
    return None


@dataclass(frozen=True)
class FilterIndex:
    """A manifest's filters grouped by event type, each group in manifest order."""

    by_type: Mapping[object, tuple[dict[str, Any], ...]]

    def filters_for(self, event_type: object) -> tuple[dict[str, Any], ...]:
        """The filters whose ``eventType`` is exactly ``event_type``."""
        key = _type_key(event_type)
        return () if key is None else self.by_type.get(key, ())


def index_filters(filters: object) -> FilterIndex:
    """Group filter entries by event type; entries that are not dicts never match."""
    groups: dict[object, list[dict[str, Any]]] = {}
    if isinstance(filters, (list, tuple)):
        for flt in filters:
            if isinstance(flt, dict):
                key = _type_key(flt.get("eventType"))
                if key is not None:
                    groups.setdefault(key, []).append(flt)
    return FilterIndex({k: tuple(v) for k, v in groups.items()})


@dataclass(frozen=True)
class _CacheEntry:
    filters: object
    index: FilterIndex
    content_verified: bool


_cache: OrderedDict[str, _CacheEntry] = OrderedDict()
_cache_lock = threading.Lock()


def _index_for(manifest: Mapping[str, Any]) -> FilterIndex:
    filters = manifest.get("eventFilters")
    version_id = manifest.get("versionId")
    if not isinstance(version_id, str):
        return index_filters(filters)
    with _cache_lock:
        entry = _cache.get(version_id)
        if entry is not None and (entry.filters is filters or entry.content_verified):
            _cache.move_to_end(version_id)
            return entry.index
    # Imported here: manifest imports filters, which would make a cycle at import time.
    from relayflow.events.manifest import manifest_version_id

    index = index_filters(filters)
    # A versionId that is the content hash names one content, so any copy of the manifest
    # (a store returns a fresh one per read) can reuse the index; other ids only this object.
    try:
        verified = manifest_version_id(manifest) == version_id
    except (TypeError, ValueError, RecursionError):
        verified = False
    with _cache_lock:
        _cache[version_id] = _CacheEntry(filters, index, verified)
        _cache.move_to_end(version_id)
        while len(_cache) > _CACHE_SIZE:
            _cache.popitem(last=False)
    return index


def _message(exc: BaseException) -> str:
    message = getattr(exc, "message", None)
    return message if isinstance(message, str) and message else str(exc)


def _route_one(flt: dict[str, Any], envelope: Any, base_key: Any) -> dict[str, Any] | None:
    filter_id = flt.get("id", MISSING)
    if "where" in flt:
        try:
            if not evaluate_predicate(flt["where"], envelope):
                return None
        except Exception as exc:  # any failure of a filter only skips that filter
            return {
                "filterId": filter_id,
                "status": "skipped",
                "reason": "where_eval_error",
                "details": _message(exc),
            }
    try:
        projected = project_input(flt.get("input", MISSING), envelope)
    except Exception as exc:
        return {
            "filterId": filter_id,
            "status": "skipped",
            "reason": "input_projection_error",
            "details": _message(exc),
        }
    return {
        "filterId": filter_id,
        "targetWorkflowId": flt.get("targetWorkflowId", MISSING),
        "input": projected,
        "idempotencyKey": f"{js_to_string(filter_id)}:{js_to_string(base_key)}",
        "status": "matched",
    }


def route_event(
    manifest: Any,
    envelope: Any,
    event_id: Any,
    idempotency_override: str | None = None,
) -> list[dict[str, Any]]:
    """Route an envelope through a manifest's event filters (the reference ``routeEvent``).

    Filters whose ``eventType`` equals the envelope's ``name`` are taken in manifest order. A
    ``where`` that is present (even null) is evaluated: false drops the filter silently, an
    error gives a ``where_eval_error`` skip. The input is then projected (an error gives an
    ``input_projection_error`` skip). Manifests are read, never changed; treat them as
    immutable once routed (indexes are cached per manifest).

    Args:
        manifest: The manifest (only ``eventFilters`` and ``versionId`` are read).
        envelope: ``{"name", "data"?, "metadata"?, "emittedAt"}``.
        event_id: The event's effective id (see ``effective_event_id``).
        idempotency_override: A caller-supplied key used instead of ``event_id`` (``""`` too).

    Returns:
        One entry per triggered or skipped filter: ``{filterId, targetWorkflowId, input,
        idempotencyKey: "<filterId>:<key>", status: "matched"}`` (``input`` may be or contain
        ``MISSING``) or ``{filterId, status: "skipped", reason, details}``.
    """
    try:
        if not isinstance(manifest, Mapping) or not isinstance(envelope, Mapping):
            return []
        name = envelope.get("name", MISSING)
        if name is MISSING:
            return []
        base_key = event_id if idempotency_override is None else idempotency_override
        out: list[dict[str, Any]] = []
        for flt in _index_for(manifest).filters_for(name):
            entry = _route_one(flt, envelope, base_key)
            if entry is not None:
                out.append(entry)
        return out
    except Exception:
        # Unreachable by design (every filter is isolated above); kept so a malformed
        # manifest can never turn one event into a crash of the ingest path.
        return []
