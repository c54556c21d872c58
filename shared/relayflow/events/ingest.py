"""Event ingest, shared by every driver and the HTTP API: request validation (reference order and
messages), the 256 KiB event cap, routing, one trigger per match, and the reference answer
``{ok, eventId, matches}``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from relayflow.errors import EventTooLargeError, InvalidEventError
from relayflow.events.canonical import wire_json
from relayflow.events.event_id import effective_event_id
from relayflow.events.jsvalue import MISSING, is_js_object
from relayflow.events.manifest import ENVIRONMENTS
from relayflow.events.router import route_event, run_id_for

MAX_EVENT_BYTES = 256 * 1024
"""The largest accepted envelope: UTF-8 bytes of its JSON text."""

DEFAULT_TENANT_META: Mapping[str, str] = {
    "tenantId": "default",
    "projectId": "default",
    "organizationId": "default",
}
ALL_FAILED = "trigger_failed_for_all_matches"
NOT_REGISTERED = "manifest_not_registered"


@dataclass(frozen=True)
class IngestRequest:
    """A validated ingest request: the envelope is ``{name, data?, metadata?, emittedAt}``."""

    environment: str
    envelope: dict[str, Any]
    idempotency_key: str | None = None


@dataclass(frozen=True)
class TriggerRequest:
    """One run to start for a matched filter, handed to the ingest's trigger callback.

    Attributes:
        workflow_id: The filter's target workflow.
        input: The projected input as plain JSON (``None`` when nothing was projected).
        idempotency_key: ``<filterId>:<eventId or caller key>``.
        run_id: ``idem-<workflowId>-<idempotencyKey>`` (see ``run_id_for``).
        triggered_by: ``{"kind": "event", "eventId", "eventType", "filterId"}``.
        environment: The environment the event was sent to.
        has_input: False when the mapper projected nothing (the wire form then has no input).
        event: The event's envelope, for flow-control keys that read it (``event.data.id``).
    """

    workflow_id: str
    input: Any
    idempotency_key: str
    run_id: str
    triggered_by: dict[str, Any]
    environment: str
    has_input: bool = True
    event: Any = field(default=None, compare=False, repr=False)
    workflow_version: str = field(default="v1")

    def to_wire(self, tenant_meta: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """The reference's trigger body, in its key order (``input`` left out when absent)."""
        body: dict[str, Any] = {
            "runId": self.run_id,
            "workflowId": self.workflow_id,
            "workflowVersion": self.workflow_version,
        }
        if self.has_input:
            body["input"] = self.input
        body["tenantMeta"] = dict(tenant_meta if tenant_meta is not None else DEFAULT_TENANT_META)
        body["environment"] = self.environment
        body["idempotencyKey"] = self.idempotency_key
        body["triggeredBy"] = dict(self.triggered_by)
        return body


Trigger = Callable[[TriggerRequest], Any]
"""Starts the run of a :class:`TriggerRequest`; returns its run id, or raises."""


def _invalid(message: str) -> InvalidEventError:
    return InvalidEventError(message)


def validate_ingest_body(body: Any) -> IngestRequest:
    """Validate a ``POST /api/events`` body, in the reference's order and with its messages.

    Rules: an object (arrays pass); ``environment`` one of production, preview, development;
    ``envelope`` an object; ``envelope.name`` and ``envelope.emittedAt`` non-empty strings
    (``emittedAt`` is not parsed); ``envelope.metadata``, when present, a non-null object;
    ``idempotencyKey``, when present, a string (null is refused). ``data`` may be anything.

    Args:
        body: The parsed JSON body.

    Returns:
        The request, its envelope reduced to ``{name, data?, metadata?, emittedAt}``.

    Raises:
        InvalidEventError: ``code`` ``invalid_body``, message of the first failed rule.
    """
    if not is_js_object(body):
        raise _invalid("expected JSON object")
    fields: Mapping[str, Any] = body if isinstance(body, dict) else {}
    environment = fields.get("environment", MISSING)
    if not isinstance(environment, str) or environment not in ENVIRONMENTS:
        raise _invalid(f'"environment" must be one of {", ".join(ENVIRONMENTS)}')
    raw_envelope = fields.get("envelope", MISSING)
    if not is_js_object(raw_envelope):
        raise _invalid('"envelope" must be an object')
    envelope: Mapping[str, Any] = raw_envelope if isinstance(raw_envelope, dict) else {}
    name = envelope.get("name", MISSING)
    if not isinstance(name, str) or not name:
        raise _invalid('"envelope.name" must be a non-empty string')
    emitted_at = envelope.get("emittedAt", MISSING)
    if not isinstance(emitted_at, str) or not emitted_at:
        raise _invalid('"envelope.emittedAt" must be an ISO timestamp string')
    metadata = envelope.get("metadata", MISSING)
    if metadata is not MISSING and not is_js_object(metadata):
        raise _invalid('"envelope.metadata" must be an object when supplied')
    key = fields.get("idempotencyKey", MISSING)
    if key is not MISSING and not isinstance(key, str):
        raise _invalid('"idempotencyKey" must be a string when supplied')
    clean: dict[str, Any] = {"name": name}
    if "data" in envelope and envelope["data"] is not MISSING:
        clean["data"] = envelope["data"]
    if metadata is not MISSING:
        clean["metadata"] = metadata
    clean["emittedAt"] = emitted_at
    return IngestRequest(environment, clean, None if key is MISSING else key)


def parse_json_body(raw: str | bytes) -> Any:
    """Parse a request body as JavaScript's ``JSON.parse`` would accept it.

    Bytes are decoded as UTF-8 (bad sequences replaced, a leading BOM dropped); ``NaN`` and
    ``Infinity`` are refused.

    Raises:
        InvalidEventError: ``code`` ``invalid_json`` with the parser's message.
    """
    text = raw.decode("utf-8", errors="replace") if isinstance(raw, bytes) else raw
    if text.startswith("\ufeff"):
        text = text[1:]

    def refuse(token: str) -> Any:
        raise ValueError(f"Unexpected token '{token}' in JSON")

    def read_int(digits: str) -> int | float:
        # Beyond Python's int-parsing limit the value is no longer a finite double anyway.
        return int(digits) if len(digits) < 4000 else float(digits)

    try:
        return json.loads(text, parse_constant=refuse, parse_int=read_int)
    except (ValueError, RecursionError) as exc:
        raise InvalidEventError(str(exc), code="invalid_json") from None


def event_size(envelope: Any) -> int:
    """Size of an envelope for the cap: UTF-8 bytes of its JSON text."""
    text = wire_json(envelope)
    return 0 if text is None else len(text.encode("utf-8"))


def check_event_size(envelope: Any, limit: int = MAX_EVENT_BYTES) -> None:
    """Raise :class:`EventTooLargeError` when the envelope is over ``limit`` bytes."""
    try:
        size = event_size(envelope)
    except RecursionError:
        raise InvalidEventError("event envelope is nested too deeply") from None
    if size > limit:
        raise EventTooLargeError(size, limit)


def plain_json(value: Any) -> tuple[bool, Any]:
    """A fresh plain-JSON copy of a projected value: ``MISSING`` members dropped, ``MISSING``
    array items as None. Returns ``(False, None)`` when the value itself is ``MISSING``."""
    if value is MISSING:
        return False, None
    if isinstance(value, dict):
        return True, {k: plain_json(v)[1] for k, v in value.items() if v is not MISSING}
    if isinstance(value, (list, tuple)):
        return True, [plain_json(v)[1] for v in value]
    return True, value


def _error_message(exc: BaseException) -> str:
    message = getattr(exc, "message", None)
    return message if isinstance(message, str) and message else str(exc)


def ingest_event(
    manifest: Mapping[str, Any] | None,
    environment: str,
    envelope: Any,
    *,
    idempotency_key: str | None = None,
    trigger: Trigger,
    max_event_bytes: int = MAX_EVENT_BYTES,
) -> dict[str, Any]:
    """Ingest one event: validate it, route it through ``manifest`` and trigger every match.

    Args:
        manifest: The environment's current manifest, or None when none is registered.
        environment: One of production, preview, development.
        envelope: ``{"name", "data"?, "metadata"?, "emittedAt"}``.
        idempotency_key: Optional caller key used instead of the event id in match keys.
        trigger: Called once per matched filter, in manifest order, with a
            :class:`TriggerRequest`; returns the run id or raises (any ``Exception``
            becomes an ``error`` match carrying its message).
        max_event_bytes: The envelope size cap.

    Returns:
        ``{"ok": True, "eventId", "matches": [...]}`` with each match ``{filterId,
        targetWorkflowId, runId, idempotencyKey, status: "queued"}``, ``{filterId, status:
        "skipped", reason, details}`` or ``{filterId, targetWorkflowId, status: "error",
        reason}``; ``{"ok": False, "reason": "manifest_not_registered", "message"}``; or
        ``{"ok": False, "reason": "trigger_failed_for_all_matches", "message"}`` when at
        least one trigger was attempted and every attempted one failed.

    Raises:
        InvalidEventError: The environment or envelope is invalid (``invalid_body``).
        EventTooLargeError: The envelope is over the cap (``payload_too_large``).
    """
    body: dict[str, Any] = {"environment": environment, "envelope": envelope}
    if idempotency_key is not None:
        body["idempotencyKey"] = idempotency_key
    request = validate_ingest_body(body)
    check_event_size(request.envelope, max_event_bytes)
    return _ingest(manifest, request, trigger)


def _ingest(
    manifest: Mapping[str, Any] | None, request: IngestRequest, trigger: Trigger
) -> dict[str, Any]:
    if manifest is None:
        return {
            "ok": False,
            "reason": NOT_REGISTERED,
            "message": f'No manifest is registered for environment "{request.environment}".',
        }
    envelope = request.envelope
    try:
        event_id = effective_event_id(envelope)
    except RecursionError:
        raise InvalidEventError("event envelope is nested too deeply") from None
    matches: list[dict[str, Any]] = []
    any_triggered = any_failed = False
    for entry in route_event(manifest, envelope, event_id, request.idempotency_key):
        if entry["status"] == "skipped":
            matches.append(entry)
            continue
        has_input, plain_input = plain_json(entry["input"])
        run = TriggerRequest(
            workflow_id=entry["targetWorkflowId"],
            input=plain_input,
            idempotency_key=entry["idempotencyKey"],
            run_id=run_id_for(entry["targetWorkflowId"], entry["idempotencyKey"]),
            triggered_by={
                "kind": "event",
                "eventId": event_id,
                "eventType": envelope["name"],
                "filterId": entry["filterId"],
            },
            environment=request.environment,
            has_input=has_input,
            event=envelope,
        )
        try:
            run_id = trigger(run)
        except Exception as exc:  # one failed trigger must not stop the others
            any_failed = True
            matches.append(
                {
                    "filterId": entry["filterId"],
                    "targetWorkflowId": entry["targetWorkflowId"],
                    "status": "error",
                    "reason": _error_message(exc),
                }
            )
            continue
        any_triggered = True
        matches.append(
            {
                "filterId": entry["filterId"],
                "targetWorkflowId": entry["targetWorkflowId"],
                "runId": run_id,
                "idempotencyKey": entry["idempotencyKey"],
                "status": "queued",
            }
        )
    if matches and not any_triggered and any_failed:
        return {
            "ok": False,
            "reason": ALL_FAILED,
            "message": "every matched filter failed to trigger",
        }
    return {"ok": True, "eventId": event_id, "matches": matches}


def ingest_status(result: Mapping[str, Any]) -> int:
    """The HTTP status of an ingest result: 502 when every trigger failed, else 200."""
    return 502 if result.get("reason") == ALL_FAILED else 200


def handle_ingest_request(
    raw_body: str | bytes,
    *,
    get_manifest: Callable[[str], Mapping[str, Any] | None],
    trigger: Trigger,
    max_event_bytes: int = MAX_EVENT_BYTES,
) -> tuple[int, dict[str, Any]]:
    """The whole ``POST /api/events`` behaviour: (HTTP status, JSON body).

    400 ``{"error": "invalid_json" | "invalid_body", "message"}`` for a bad request, 413
    ``{"error": "payload_too_large", "message"}`` over the cap, otherwise the ingest result
    with 200 (including ``manifest_not_registered``) or 502. Serialise the body with
    ``wire_json`` for the reference's exact bytes.

    Args:
        raw_body: The request body as received.
        get_manifest: Returns an environment's current manifest, or None.
        trigger: As for :func:`ingest_event`.
        max_event_bytes: The envelope size cap.
    """
    try:
        request = validate_ingest_body(parse_json_body(raw_body))
        check_event_size(request.envelope, max_event_bytes)
    except InvalidEventError as exc:
        return 400, {"error": exc.code, "message": exc.message}
    except EventTooLargeError as exc:
        return 413, {"error": exc.code, "message": exc.message}
    result = _ingest(get_manifest(request.environment), request, trigger)
    return ingest_status(result), result
