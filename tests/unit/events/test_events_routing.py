"""The router's type index, its cache per manifest, ids, and ingest through a trigger callback."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from relayflow.events import (
    MAX_EVENT_BYTES,
    EventTooLargeError,
    InvalidEventError,
    TriggerRequest,
    build_manifest,
    compile_filter,
    index_filters,
    ingest_event,
    ingest_status,
    route_event,
    run_id_for,
)

ENVELOPE = {
    "name": "order.created",
    "data": {"id": "o1", "total": 120},
    "metadata": {"eventId": "evt_1"},
    "emittedAt": "2026-05-09T13:22:08.000Z",
}


def filters_for(event_type: str, *targets: str, **decl: Any) -> list[dict[str, Any]]:
    return [compile_filter(event_type, {"target": {"id": t}, **decl}) for t in targets]


def make_manifest(filters: list[dict[str, Any]]) -> dict[str, Any]:
    return build_manifest(environment="production", workflows=[], event_filters=filters, built_at=1)


def test_index_groups_filters_by_event_type_in_manifest_order() -> None:
    a = {"id": "ef_2", "eventType": "x", "targetWorkflowId": "w"}
    b = {"id": "ef_1", "eventType": "y", "targetWorkflowId": "w"}
    c = {"id": "ef_0", "eventType": "x", "targetWorkflowId": "w"}
    index = index_filters([a, b, None, "junk", c])
    assert index.filters_for("x") == (a, c)
    assert index.filters_for("y") == (b,)
    assert index.filters_for("z") == ()
    assert index.filters_for(None) == ()


def test_filters_of_other_types_are_never_evaluated() -> None:
    # A malformed where on another type would be reported if it were evaluated.
    other = {"id": "ef_o", "eventType": "other", "targetWorkflowId": "w", "where": {"bogus": 1}}
    mine = filters_for("order.created", "wf")
    matches = route_event(make_manifest([other, *mine]), ENVELOPE, "evt_1")
    assert [m["filterId"] for m in matches] == [mine[0]["id"]]


def test_a_copy_of_a_content_addressed_manifest_routes_the_same() -> None:
    manifest = make_manifest(filters_for("order.created", "wf-a", "wf-b"))
    first = route_event(manifest, ENVELOPE, "evt_1")
    assert route_event(copy.deepcopy(manifest), ENVELOPE, "evt_1") == first


def test_hand_made_manifests_sharing_a_version_id_do_not_share_an_index() -> None:
    one = {"versionId": "v_test", "eventFilters": filters_for("order.created", "wf-a")}
    two = {"versionId": "v_test", "eventFilters": filters_for("order.created", "wf-b")}
    assert route_event(one, ENVELOPE, "e")[0]["targetWorkflowId"] == "wf-a"
    assert route_event(two, ENVELOPE, "e")[0]["targetWorkflowId"] == "wf-b"
    assert route_event(one, ENVELOPE, "e")[0]["targetWorkflowId"] == "wf-a"


IDEMPOTENCY = [
    ("event-id", "evt_1", None, "ef:evt_1"),
    ("override", "evt_1", "k-9", "ef:k-9"),
    ("empty-override", "evt_1", "", "ef:"),
    ("number-id", 42, None, "ef:42"),
    ("big-number-id", 1e21, None, "ef:1e+21"),
    ("false-id", False, None, "ef:false"),
    ("object-id", {"a": 1}, None, "ef:[object Object]"),
]


@pytest.mark.parametrize(
    ("event_id", "override", "key"), [pytest.param(*row[1:], id=row[0]) for row in IDEMPOTENCY]
)
def test_idempotency_keys_follow_javascript_string_conversion(
    event_id: Any, override: str | None, key: str
) -> None:
    manifest = {
        "eventFilters": [{"id": "ef", "eventType": "order.created", "targetWorkflowId": "w"}]
    }
    [match] = route_event(manifest, ENVELOPE, event_id, override)
    assert match["idempotencyKey"] == key


def test_run_ids_are_plain_concatenation() -> None:
    assert run_id_for("wf with space", "ef:a/b:1") == "idem-wf with space-ef:a/b:1"


@pytest.mark.parametrize(
    "manifest",
    [None, 5, {}, {"eventFilters": None}, {"eventFilters": [None, 3, {"eventType": 5}]}],
)
def test_route_event_tolerates_malformed_manifests(manifest: Any) -> None:
    assert route_event(manifest, ENVELOPE, "e") == []


# ---- ingest -------------------------------------------------------------------------------


class Recorder:
    """A trigger callback that records requests and fails for chosen workflows."""

    def __init__(self, failing: frozenset[str] = frozenset()) -> None:
        self.requests: list[TriggerRequest] = []
        self.failing = failing

    def __call__(self, request: TriggerRequest) -> str:
        self.requests.append(request)
        if request.workflow_id in self.failing:
            raise RuntimeError(f"cannot start {request.workflow_id}")
        return request.run_id


def test_ingest_triggers_each_match_with_its_run_id_and_origin() -> None:
    [flt] = filters_for("order.created", "wf", input={"object": {"order": {"path": "data.id"}}})
    trigger = Recorder()
    result = ingest_event(make_manifest([flt]), "production", ENVELOPE, trigger=trigger)
    key = f"{flt['id']}:evt_1"
    assert trigger.requests == [
        TriggerRequest(
            workflow_id="wf",
            input={"order": "o1"},
            idempotency_key=key,
            run_id=f"idem-wf-{key}",
            triggered_by={
                "kind": "event",
                "eventId": "evt_1",
                "eventType": "order.created",
                "filterId": flt["id"],
            },
            environment="production",
        )
    ]
    assert result == {
        "ok": True,
        "eventId": "evt_1",
        "matches": [
            {
                "filterId": flt["id"],
                "targetWorkflowId": "wf",
                "runId": f"idem-wf-{key}",
                "idempotencyKey": key,
                "status": "queued",
            }
        ],
    }
    assert ingest_status(result) == 200


def test_missing_projected_values_vanish_from_the_trigger_input() -> None:
    flt = filters_for(
        "order.created",
        "wf",
        input={"object": {"id": {"path": "data.id"}, "x": {"path": "data.nope"}}},
    )
    bare = filters_for("order.created", "wf2", input={"path": "data.nope"})
    trigger = Recorder()
    ingest_event(make_manifest(flt + bare), "production", ENVELOPE, trigger=trigger)
    by_workflow = {r.workflow_id: r for r in trigger.requests}
    assert (by_workflow["wf"].input, by_workflow["wf"].has_input) == ({"id": "o1"}, True)
    assert (by_workflow["wf2"].input, by_workflow["wf2"].has_input) == (None, False)
    assert "input" not in by_workflow["wf2"].to_wire()


def test_a_failed_trigger_is_an_error_match_and_the_others_still_run() -> None:
    manifest = make_manifest(filters_for("order.created", "bad", "good"))
    trigger = Recorder(failing=frozenset({"bad"}))
    result = ingest_event(manifest, "production", ENVELOPE, trigger=trigger)
    statuses = {m["targetWorkflowId"]: (m["status"], m.get("reason")) for m in result["matches"]}
    assert statuses == {"bad": ("error", "cannot start bad"), "good": ("queued", None)}
    assert result["ok"] is True


def test_every_trigger_failing_answers_502() -> None:
    manifest = make_manifest(filters_for("order.created", "bad"))
    result = ingest_event(
        manifest, "production", ENVELOPE, trigger=Recorder(failing=frozenset({"bad"}))
    )
    assert result == {
        "ok": False,
        "reason": "trigger_failed_for_all_matches",
        "message": "every matched filter failed to trigger",
    }
    assert ingest_status(result) == 502


def test_no_manifest_answers_not_registered() -> None:
    result = ingest_event(None, "preview", ENVELOPE, trigger=Recorder())
    assert result == {
        "ok": False,
        "reason": "manifest_not_registered",
        "message": 'No manifest is registered for environment "preview".',
    }


def test_an_event_over_256_kib_is_refused() -> None:
    big = {**ENVELOPE, "data": "x" * MAX_EVENT_BYTES}
    with pytest.raises(EventTooLargeError) as info:
        ingest_event(make_manifest([]), "production", big, trigger=Recorder())
    assert info.value.code == "payload_too_large"
    assert info.value.size > info.value.limit == MAX_EVENT_BYTES


def test_an_event_just_under_the_cap_is_accepted() -> None:
    small = {**ENVELOPE, "data": "x" * (MAX_EVENT_BYTES - 1000)}
    assert ingest_event(make_manifest([]), "production", small, trigger=Recorder())["ok"] is True


@pytest.mark.parametrize(
    ("environment", "envelope", "message"),
    [
        ("staging", ENVELOPE, '"environment" must be one of production, preview, development'),
        ("production", {**ENVELOPE, "name": ""}, '"envelope.name" must be a non-empty string'),
        ("production", {**ENVELOPE, "metadata": None}, '"envelope.metadata" must be an object'),
    ],
)
def test_invalid_events_are_refused(environment: str, envelope: Any, message: str) -> None:
    with pytest.raises(InvalidEventError) as info:
        ingest_event(make_manifest([]), environment, envelope, trigger=Recorder())
    assert info.value.code == "invalid_body"
    assert info.value.message.startswith(message)
