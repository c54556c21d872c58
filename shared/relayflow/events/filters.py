"""Event filters: compiling a declaration into its manifest entry, ``trigger_on`` and the
process-wide filter registry that ``build_manifest`` reads.

A filter id is ``ef_`` + the reference's 16-hex FNV-like hash of the canonical JSON of
``{eventType, where ?? null, input ?? null, targetWorkflowId}``; ``payloadHash`` is the same hash.
"""

from __future__ import annotations

import copy
import threading
from typing import Any

from relayflow.errors import EventFilterCompileError
from relayflow.events.canonical import canonical_json, filter_hash
from relayflow.events.input_mapper import validate_input_mapper
from relayflow.events.jsvalue import MISSING, is_js_object, js_typeof
from relayflow.events.predicate import validate_predicate

__all__ = [
    "clear_filter_registry",
    "compile_filter",
    "registered_filters",
    "trigger_on",
]


def compile_filter(event_type: Any, declaration: Any) -> dict[str, Any]:
    """Validate an event filter declaration and compile it to its manifest entry.

    Checks run in the reference's order: a non-empty string event type, a dict declaration, a
    ``target`` object with a non-empty string ``id``, then ``where`` and ``input`` (when the key
    is present, even as ``None``) through their validators, then no callable ``match``.

    Args:
        event_type: The event name the filter listens to (exact match).
        declaration: ``{"target": {"id": ...}, "where"?: predicate, "input"?: mapper}``. Only
            ``target["id"]`` counts from the target; other keys are ignored.

    Returns:
        ``{"id", "eventType", "payloadHash", "targetWorkflowId", "where"?, "input"?}`` with
        ``where``/``input`` as authored (copied, not canonicalised).

    Raises:
        EventFilterCompileError: With the validator's messages in ``.errors`` when ``where`` or
            ``input`` is invalid.
    """
    if not isinstance(event_type, str) or not event_type:
        raise EventFilterCompileError(
            "trigger.on(eventType, ...): eventType must be a non-empty string"
        )
    if not is_js_object(declaration):
        raise EventFilterCompileError(
            f'trigger.on("{event_type}", ...): declaration must be an object'
        )
    fields: dict[str, Any] = declaration if isinstance(declaration, dict) else {}
    target = fields.get("target", MISSING)
    if not is_js_object(target):
        raise EventFilterCompileError(
            f'trigger.on("{event_type}", ...): "target" must be a workflow definition '
            f"(got {js_typeof(target)})"
        )
    target_id = target.get("id") if isinstance(target, dict) else None
    if not isinstance(target_id, str) or not target_id:
        raise EventFilterCompileError(
            f'trigger.on("{event_type}", ...): "target.id" must be a non-empty string'
        )
    where = fields.get("where", MISSING)
    if where is not MISSING:
        result = validate_predicate(where)
        if not result.ok:
            raise EventFilterCompileError(
                f'trigger.on("{event_type}", target={target_id}): invalid where clause',
                result.errors,
            )
    mapper = fields.get("input", MISSING)
    if mapper is not MISSING:
        result = validate_input_mapper(mapper)
        if not result.ok:
            raise EventFilterCompileError(
                f'trigger.on("{event_type}", target={target_id}): invalid input mapper',
                result.errors,
            )
    if callable(fields.get("match")):
        raise EventFilterCompileError(
            f'trigger.on("{event_type}"): the "match" callback is no longer supported. '
            'Use the structured "where" predicate instead. See architecture doc §12.'
        )
    digest = filter_hash(
        canonical_json(
            {
                "eventType": event_type,
                "where": None if where is MISSING else where,
                "input": None if mapper is MISSING else mapper,
                "targetWorkflowId": target_id,
            }
        )
    )
    entry: dict[str, Any] = {
        "id": f"ef_{digest}",
        "eventType": event_type,
        "payloadHash": digest,
        "targetWorkflowId": target_id,
    }
    if where is not MISSING:
        entry["where"] = copy.deepcopy(where)
    if mapper is not MISSING:
        entry["input"] = copy.deepcopy(mapper)
    return entry


_registry: dict[str, dict[str, Any]] = {}
_registry_lock = threading.Lock()


def _target_declaration(target: object) -> object:
    if isinstance(target, str):
        return {"id": target}
    if isinstance(target, dict) or target is None:
        return target
    target_id = getattr(target, "id", MISSING)
    if target_id is MISSING:
        return target
    return {"id": target_id}


def trigger_on(
    event_type: str,
    *,
    target: Any,
    where: Any = None,
    input: Any = None,
) -> dict[str, Any]:
    """Declare that events of ``event_type`` start runs of ``target``.

    The compiled filter is recorded in the process-wide registry (re-declaring the same
    filter replaces it) and returned; :func:`relayflow.events.build_manifest` collects it.

    Args:
        event_type: Exact event name, e.g. ``"order.created"``.
        target: The workflow: its id, a ``{"id": ...}`` dict, or any object with an ``id``.
        where: Optional predicate the event must satisfy; None means "every event".
        input: Optional input mapper; None passes the event's ``data`` as the input.

    Returns:
        The filter's manifest entry (``{"id": "ef_…", "eventType", ...}``).

    Raises:
        EventFilterCompileError: The declaration is invalid (see :func:`compile_filter`).

    Example:
        >>> f = trigger_on("order.created", target="orders.fulfil",
        ...                where={"gt": [{"path": "data.total"}, {"lit": 100}]})
        >>> f["id"].startswith("ef_")
        True
    """
    declaration: dict[str, Any] = {"target": _target_declaration(target)}
    if where is not None:
        declaration["where"] = where
    if input is not None:
        declaration["input"] = input
    entry = compile_filter(event_type, declaration)
    with _registry_lock:
        _registry[entry["id"]] = entry
    return copy.deepcopy(entry)


def registered_filters() -> list[dict[str, Any]]:
    """Copies of every filter declared with :func:`trigger_on`, in first-declaration order."""
    with _registry_lock:
        return copy.deepcopy(list(_registry.values()))


def clear_filter_registry() -> None:
    """Forget every declared filter (tests, hot reload)."""
    with _registry_lock:
        _registry.clear()
