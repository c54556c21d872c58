"""The step host entry point: validation order, statuses and the 200 response variants."""

from __future__ import annotations

import json
from typing import Any

import pytest
from sdk_harness import clean_registry  # noqa: F401

from relayflow.dispatch.inline import InlineDispatcher
from relayflow.protocol import StepRequest, parse_step_response
from relayflow.sdk import workflow
from relayflow.worker import handle_step_request
from relayflow.worker import handler as handler_module
from relayflow.worker.handler import answer_step_request


def _request(**overrides: Any) -> dict[str, Any]:
    wire = StepRequest(run_id="run_1", workflow_id="echo", invocation_count=1, input=7).to_wire()
    wire.update(overrides)
    return wire


@pytest.fixture(autouse=True)
def echo() -> None:
    @workflow(id="echo")
    def echo_body(data: Any, ctx: Any) -> Any:
        return {"echo": data}


def test_a_valid_request_answers_200_with_a_completed_response() -> None:
    status, body = handle_step_request(_request())
    assert status == 200
    assert body["status"] == "completed"
    assert body["output"] == {"echo": 7}
    assert parse_step_response(body).status == "completed"


def test_json_text_and_bytes_are_accepted() -> None:
    assert handle_step_request(json.dumps(_request()))[0] == 200
    assert handle_step_request(json.dumps(_request()).encode())[0] == 200


@pytest.mark.parametrize("raw", ["{not json", b"\xff\xfe", ""])
def test_a_body_that_is_not_json_is_400_invalid_json(raw: Any) -> None:
    status, body = handle_step_request(raw)
    assert (status, body["error"]) == (400, "invalid_json")
    assert body["message"]


def _without(key: str) -> dict[str, Any]:
    wire = _request()
    del wire[key]
    return wire


@pytest.mark.parametrize(
    ("raw", "fragment"),
    [
        ([1, 2], "JSON object"),
        (_without("journal"), "journal"),
        (_without("deadline"), "deadline"),
        (_request(protocolVersion="1"), "protocolVersion"),
        (_request(runId=""), "runId"),
        (_request(workflowId=3), "workflowId"),
        (_request(invocationCount=0), "invocationCount"),
        (_request(journal=[]), "journal"),
        (_request(tenantMeta="x"), "tenantMeta"),
        (_request(environment="staging"), "environment"),
        (_request(journal={"stepResults": {"a": {"status": "exploded"}}}), "invalid step request"),
    ],
)
def test_structurally_bad_requests_are_400_invalid_request(raw: Any, fragment: str) -> None:
    status, body = handle_step_request(raw)
    assert (status, body["error"]) == (400, "invalid_request")
    assert fragment in body["message"]


def test_the_structure_is_checked_before_the_protocol_version() -> None:
    raw = _request(protocolVersion=2)
    del raw["runMeta"]
    assert handle_step_request(raw)[0] == 400


def test_another_protocol_version_is_426() -> None:
    status, body = handle_step_request(_request(protocolVersion=2))
    assert (status, body["error"]) == (426, "protocol_version_mismatch")


def test_the_protocol_version_is_checked_before_the_workflow() -> None:
    assert handle_step_request(_request(protocolVersion=2, workflowId="nobody"))[0] == 426


def test_an_unknown_workflow_is_404() -> None:
    status, body = handle_step_request(_request(workflowId="nobody"))
    assert (status, body["error"]) == (404, "workflow_not_found")
    assert "nobody" in body["message"]


def test_an_executor_crash_is_500(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("executor bug")

    monkeypatch.setattr(handler_module, "execute", broken)
    status, body = handle_step_request(_request())
    assert (status, body["error"]) == (500, "executor_error")
    assert "executor bug" in body["message"]


def test_a_failing_workflow_is_still_200() -> None:
    @workflow(id="fails")
    def fails(data: Any, ctx: Any) -> Any:
        raise ValueError("bad input")

    status, body = handle_step_request(_request(workflowId="fails"))
    assert status == 200
    assert body["status"] == "failed"
    assert body["error"]["message"] == "bad input"
    assert body["error"]["name"] == "ValueError"
    assert body["error"]["category"] == "USER_ERROR"


def test_missing_journal_sub_maps_are_filled_in() -> None:
    status, body = handle_step_request(_request(journal={}))
    assert status == 200
    assert body["journal"]["stepResults"] == {}
    assert body["journal"]["streamsCompleted"] == {}


def test_an_output_that_is_not_json_fails_the_run() -> None:
    @workflow(id="opaque")
    def opaque(data: Any, ctx: Any) -> Any:
        return object()

    status, body = handle_step_request(_request(workflowId="opaque"))
    assert status == 200
    assert body["status"] == "failed"
    assert "JSON" in body["error"]["message"]


def test_the_in_process_form_answers_the_same_response_as_a_model() -> None:
    status, response = answer_step_request(_request())
    assert status == 200
    assert not isinstance(response, dict)
    assert response.to_wire() == handle_step_request(_request())[1]
    # The orchestrator's validation takes the model as it is: no second copy of the journal.
    assert parse_step_response(response) is response


def test_the_in_process_form_refuses_with_the_same_wire_errors() -> None:
    wire = _request(workflowId="nope")
    assert answer_step_request(wire) == handle_step_request(wire)


def test_the_inline_dispatcher_answers_in_wire_form_and_hands_the_engine_the_model() -> None:
    dispatcher = InlineDispatcher()
    status, body = dispatcher.dispatch(_request())
    assert (status, body) == handle_step_request(_request())
    status, response = dispatcher.dispatch_in_process(_request())
    assert status == 200 and response.to_wire() == body
