"""``POST /api/runs/{runId}/checkpoints``: an HTTP step host makes one step durable.

The caller is a step host running an invocation, not an API client: it proves itself with
the checkpoint capability its step request carried (``x-relayflow-checkpoint-capability``),
never with a bearer token. The entry goes through the same checkpoint log the engine reads,
so it counts exactly as one written by an inline or Lambda-worker host.
"""

from __future__ import annotations

from typing import Annotated, Any
from urllib.parse import unquote

import pydantic
from aws_lambda_powertools.event_handler.openapi.params import Body, Path
from aws_lambda_powertools.event_handler.router import APIGatewayHttpRouter
from pydantic import WithJsonSchema

from relayflow.api.context import ApiContext
from relayflow.api.errors import ApiError, describe_validation_errors
from relayflow.api.models import CheckpointStoredView, documented_body
from relayflow.api.responses import BODY_ERRORS, declare
from relayflow.dispatch.capabilities import CAPABILITY_HEADER
from relayflow.errors import CapabilityForbiddenError, CheckpointSlotTakenError, SignatureError
from relayflow.ports import CheckpointLog
from relayflow.protocol import CheckpointEntry

RunId = Annotated[str, Path(description="the run id (URL-encode '/' in child run ids)")]
#: What a host writes; fences and cancels are the orchestrator's own entries.
HOST_KINDS = ("claim", "step", "metadata", "chunk", "group")
#: What a group carries (a claim is an invocation's first write, never grouped).
GROUPED_KINDS = ("step", "metadata", "chunk")
#: Validated after the capability, so a caller without one learns nothing from a 400.
EntryBody = Annotated[Any, WithJsonSchema(documented_body(CheckpointEntry))]


def build_router(ctx: ApiContext) -> APIGatewayHttpRouter:
    """The checkpoint route over ``ctx``'s driver and capability signer."""
    router = APIGatewayHttpRouter()  # type: ignore[no-untyped-call]

    @router.post(
        "/api/runs/<run_id>/checkpoints",
        summary="Write one checkpoint of a running invocation (HTTP step hosts)",
        description=(
            "Called by an HTTP step host whose step request offered per-step checkpoints, "
            f"with that request's capability in the {CAPABILITY_HEADER} header (no bearer "
            "token). Repeating an entry already stored answers 200; a slot holding another "
            "entry answers 409 checkpoint_slot_taken with its kind in details."
        ),
        tags=["runs"],
        operation_id="writeCheckpoint",
        security=[{"checkpointCapability": []}],
        responses=declare(200, CheckpointStoredView, "the entry is stored", *BODY_ERRORS, 404, 409),
    )
    def write_checkpoint(run_id: RunId, body: Annotated[EntryBody, Body()]) -> CheckpointStoredView:
        run_id = unquote(run_id)
        if ctx.checkpoint_capabilities is None:
            raise ApiError(401, "unauthorized", "this deployment grants no checkpoint capabilities")
        try:
            capability = ctx.checkpoint_capabilities.verify(
                router.current_event.headers.get(CAPABILITY_HEADER)
            )
        except SignatureError as exc:
            raise ApiError(401, "unauthorized", exc.message) from None
        entry = _entry(body)
        try:
            capability.check(run_id, entry.seq)
        except CapabilityForbiddenError as exc:
            raise ApiError(403, exc.code, exc.message) from None
        if entry.kind not in HOST_KINDS:
            raise ApiError(
                403, "checkpoint_forbidden", f"a step host writes {', '.join(HOST_KINDS)} entries"
            )
        grouped = entry.entries or []
        if entry.kind == "group" and (
            not grouped or any(e.kind not in GROUPED_KINDS for e in grouped)
        ):
            raise ApiError(
                403,
                "checkpoint_forbidden",
                f"a group carries one or more {', '.join(GROUPED_KINDS)} entries",
            )
        log: CheckpointLog | None = getattr(
            getattr(ctx.driver, "engine", None), "checkpoints", None
        )
        if log is None:
            raise ApiError(404, "not_found", "this orchestrator keeps no checkpoint log")
        try:
            log.append(run_id, entry)
        except CheckpointSlotTakenError as exc:
            taken = exc.taken if isinstance(exc.taken, CheckpointEntry) else None
            if taken is None or taken.to_wire() != entry.to_wire():
                raise ApiError(
                    409,
                    "checkpoint_slot_taken",
                    f"checkpoint slot {entry.seq} of run {run_id} holds another entry",
                    details=_kind_of(taken),
                ) from None
        return CheckpointStoredView(run_id=run_id, seq=entry.seq)

    return router


def _entry(body: Any) -> CheckpointEntry:
    try:
        return CheckpointEntry.model_validate(body)
    except pydantic.ValidationError as exc:
        errors = [{**err, "loc": ("body", *err["loc"])} for err in exc.errors()]
        code, message, problems = describe_validation_errors(errors)
        details = [p.to_wire() for p in problems] or None
        raise ApiError(400, code, message, details=details) from None


def _kind_of(taken: CheckpointEntry | None) -> dict[str, object] | None:
    """What the host needs of the entry in its way: a cancel stops it as a cancel."""
    if taken is None:
        return None
    return {"kind": taken.kind, "reason": taken.reason, "compensate": taken.compensate}
