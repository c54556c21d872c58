"""The wire models keep the reference's camelCase names and unknown fields."""

import pydantic
import pytest

from relayflow.protocol import StepJournalEntry, StepRequest, WaitingResponse, parse_step_response


def test_step_request_round_trips_in_camel_case() -> None:
    request = StepRequest(run_id="r1", workflow_id="w", invocation_count=1, input={"a": 1})
    wire = request.to_wire()
    assert wire["runId"] == "r1"
    assert wire["protocolVersion"] == 1
    assert wire["deadline"] == 9007199254740991
    assert StepRequest.model_validate(wire) == request


def test_unknown_journal_fields_survive_a_round_trip() -> None:
    raw = {
        "status": "waiting",
        "waitpoints": [{"clientWaitpointId": "sleep:0", "kind": "DATETIME"}],
        "journal": {"stepResults": {"a": {"status": "ok", "output": 1, "futureField": 7}}},
    }
    response = parse_step_response(raw)
    assert isinstance(response, WaitingResponse)
    assert response.to_wire()["journal"]["stepResults"]["a"]["futureField"] == 7


def test_an_unknown_status_is_not_a_step_response() -> None:
    with pytest.raises(pydantic.ValidationError):
        parse_step_response({"status": "exploded"})


def test_empty_entry_collections_are_shared_tuples_and_stay_arrays_on_the_wire() -> None:
    entry, other = StepJournalEntry(status="ok", output=1), StepJournalEntry(status="ok")
    assert entry.metadata_updates == () and entry.compensables == ()
    assert entry.metadata_updates is other.metadata_updates
    wire = entry.to_wire()
    assert wire["metadataUpdates"] == [] and wire["compensables"] == []
    again = StepJournalEntry.model_validate({**wire, "compensables": ["a/b"]})
    assert again.compensables == ("a/b",)
