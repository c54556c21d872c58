"""The step host entry point: validate a step request, replay the workflow, answer (status, body).

Checks run in the reference order: 400 ``invalid_json``, 400 ``invalid_request``, 426
``protocol_version_mismatch``, 404 ``workflow_not_found``, then relayflow's 409
``version_unavailable`` (the run is pinned to another build), 500 ``executor_error``, else 200
with the StepResponse (even when the workflow failed), naming the code that answered.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from typing import Any

import pydantic
import requests

from relayflow.clock import wall_ms
from relayflow.errors import (
    CheckpointFencedSignal,
    CheckpointUnavailableError,
    RequestReplayedSignal,
)
from relayflow.ports import CheckpointWriter
from relayflow.protocol import (
    ENVIRONMENTS,
    PROTOCOL_VERSION,
    REQUEST_REPLAYED,
    VERSION_UNAVAILABLE,
    StepRequest,
    StepResponse,
)
from relayflow.sdk.executor import execute
from relayflow.sdk.invocation import ExecutorOptions
from relayflow.sdk.registry import find_workflow
from relayflow.worker.builds import host_code_version, refuses_pin
from relayflow.worker.checkpoint_client import channel_log

_log = logging.getLogger("relayflow.worker")

_REQUIRED = (
    "protocolVersion",
    "runId",
    "workflowId",
    "workflowVersion",
    "invocationCount",
    "journal",
    "environment",
    "deadline",
    "tenantMeta",
    "runMeta",
)


def _wall_clock_ms() -> int:
    return wall_ms()


def _refuse(status: int, code: str, message: str) -> tuple[int, dict[str, Any]]:
    return status, {"error": code, "message": message}


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _structural_problem(raw: dict[str, Any]) -> str | None:
    """The reference's structural check of a step request (sub-fields are filled in later)."""
    missing = [key for key in _REQUIRED if key not in raw]
    if missing:
        return f"missing field(s): {', '.join(missing)}"
    if not _is_number(raw["protocolVersion"]):
        return "protocolVersion must be a number"
    for key in ("runId", "workflowId"):
        if not isinstance(raw[key], str) or not raw[key]:
            return f"{key} must be a non-empty string"
    if not _is_number(raw["invocationCount"]) or raw["invocationCount"] < 1:
        return "invocationCount must be a number >= 1"
    for key in ("journal", "tenantMeta", "runMeta"):
        if not isinstance(raw[key], dict):
            return f"{key} must be an object"
    if raw["environment"] not in ENVIRONMENTS:
        return f"environment must be one of {', '.join(ENVIRONMENTS)}"
    return None


def handle_step_request(
    raw: Any,
    *,
    services: Mapping[str, object] | None = None,
    now_ms: Callable[[], int] | None = None,
    options: ExecutorOptions | None = None,
    checkpoints: CheckpointWriter | None = None,
    checkpoint_session: requests.Session | None = None,
    claim: bool = False,
) -> tuple[int, dict[str, Any]]:
    """Run one invocation of a workflow body for the orchestrator.

    Args:
        raw: The request: ``StepRequest.to_wire()`` (a dict), or its JSON text/bytes.
        services: What ``ctx.services.resolve(name)`` / ``.has(name)`` see.
        now_ms: The host's clock in epoch ms (a virtual clock in tests).
        options: Executor tuning (in-process retry threshold, checkpoint interval...).
        checkpoints: The runs' checkpoint log: with it, requests that offer the checkpoint
            channel make each step durable before the body goes on. Without it, a channel
            naming the orchestrator's checkpoint route (an HTTP dispatcher's opt-in) is
            written through that route.
        checkpoint_session: The ``requests.Session`` of those checkpoint calls.
        claim: Claim the invocation's first slot in ``checkpoints`` before anything runs, so
            that a copy of the request (a replay) runs nothing (a remote host's own log).
            Through the orchestrator's route a host always claims.

    Returns:
        ``(HTTP status, body)``: 200 with a StepResponse in wire form, otherwise
        ``{"error", "message"}``; 409 ``checkpoint_fenced`` when another driver took the
        run over during the invocation (nothing more is answered), 409 ``request_replayed``
        when the invocation's slot was already claimed, 503 ``checkpoint_unavailable`` when
        it could not be claimed.
    """
    status, body = answer_step_request(
        raw,
        services=services,
        now_ms=now_ms,
        options=options,
        checkpoints=checkpoints,
        checkpoint_session=checkpoint_session,
        claim=claim,
    )
    if isinstance(body, dict):
        return status, body
    try:
        return status, body.to_wire()
    except Exception as exc:
        _log.exception("executor error: the answer does not serialise")
        return _refuse(500, "executor_error", f"{type(exc).__name__}: {exc}")


def answer_step_request(
    raw: Any,
    *,
    services: Mapping[str, object] | None = None,
    now_ms: Callable[[], int] | None = None,
    options: ExecutorOptions | None = None,
    checkpoints: CheckpointWriter | None = None,
    checkpoint_session: requests.Session | None = None,
    claim: bool = False,
) -> tuple[int, StepResponse | dict[str, Any]]:
    """:func:`handle_step_request` for a caller in the same process: a 200 carries the
    StepResponse itself, so a long run's journal is not turned into wire form and validated
    back (the orchestrator's save serialises it anyway)."""
    if isinstance(raw, str | bytes | bytearray):
        try:
            raw = json.loads(raw)
        except ValueError as exc:
            return _refuse(400, "invalid_json", f"request body is not JSON: {exc}")
    if not isinstance(raw, dict):
        return _refuse(400, "invalid_request", "request body must be a JSON object")
    problem = _structural_problem(raw)
    if problem is not None:
        return _refuse(400, "invalid_request", problem)
    if raw["protocolVersion"] != PROTOCOL_VERSION:
        return _refuse(
            426,
            "protocol_version_mismatch",
            f"protocol version {raw['protocolVersion']!r} is not supported "
            f"(this host speaks {PROTOCOL_VERSION})",
        )
    try:
        request = StepRequest.model_validate(raw)
    except pydantic.ValidationError as exc:
        return _refuse(400, "invalid_request", f"invalid step request: {exc}")
    workflow = find_workflow(request.workflow_id)
    if workflow is None:
        return _refuse(
            404, "workflow_not_found", f"workflow {request.workflow_id!r} is not registered"
        )
    here = host_code_version()
    if refuses_pin(workflow, request.code_version, here):
        assert request.code_version is not None
        return _refuse(
            409,
            VERSION_UNAVAILABLE,
            f"run {request.run_id} is pinned to build {request.code_version.build} of "
            f"workflow {request.workflow_id!r}; this host runs build {here.build}",
        )
    clock = now_ms or _wall_clock_ms
    if checkpoints is None:
        checkpoints = channel_log(request, session=checkpoint_session, now_ms=clock)
        claim = checkpoints is not None
    try:
        response = execute(
            workflow,
            request,
            services=services,
            now_ms=clock,
            options=options,
            checkpoints=checkpoints,
            claim=claim,
        )
    except RequestReplayedSignal as exc:
        return _refuse(409, REQUEST_REPLAYED, str(exc))
    except CheckpointFencedSignal as exc:
        return _refuse(409, "checkpoint_fenced", str(exc))
    except CheckpointUnavailableError as exc:
        # Only the claim, made before anything ran, gets here (later checkpoints end the
        # invocation with its answer): nothing ran, the orchestrator sends it again.
        return _refuse(503, exc.code, exc.message)
    except Exception as exc:
        _log.exception("executor error for run %s", request.run_id)
        return _refuse(500, "executor_error", f"{type(exc).__name__}: {exc}")
    response.code_version = here
    response.versioning = workflow.config.versioning
    return 200, response
