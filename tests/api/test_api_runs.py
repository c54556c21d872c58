"""The run routes over the in-memory driver: trigger, read, list, timeline, cancel, deliveries."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import jsonschema
import pytest
from api_harness import READER, RELEASED, WRITER, Api, make_api

from relayflow.api import metrics as m
from relayflow.api.context import WaitPolicy
from relayflow.core.settings import CoreSettings
from relayflow.ports import DispatcherResolver
from relayflow.testing import WorkflowTestEnv


def test_trigger_answers_201_with_the_completed_run(api: Api) -> None:
    answer = api.post("/api/runs", {"workflowId": "api.echo", "input": {"n": 1}, "tags": ["t1"]})

    assert answer.status == 201
    run = answer.body
    assert run["workflowId"] == "api.echo"
    assert run["status"] == "completed"
    assert run["output"] == {"echo": {"n": 1}}
    assert run["input"] == {"n": 1}
    assert run["tags"] == ["t1"]
    assert run["environment"] == "development"
    assert run["pendingWaitpoints"] == []
    assert isinstance(run["startedAt"], int) and isinstance(run["completedAt"], int)
    assert api.metrics.counts[m.RUNS_TRIGGERED] == 1
    assert api.metrics.counts[m.RUNS_COMPLETED] == 1


def test_a_repeated_idempotency_key_answers_200_with_the_first_run(api: Api) -> None:
    first = api.post("/api/runs", {"workflowId": "api.echo", "input": "a", "idempotencyKey": "k1"})
    second = api.post("/api/runs", {"workflowId": "api.echo", "input": "b", "idempotencyKey": "k1"})

    assert (first.status, second.status) == (201, 200)
    assert second.body["id"] == first.body["id"] == "idem-api.echo-k1"
    assert second.body["input"] == "a"
    assert api.metrics.counts[m.RUNS_TRIGGERED] == 1


def test_an_explicit_run_id_is_used(api: Api) -> None:
    answer = api.post("/api/runs", {"workflowId": "api.echo", "runId": "my-run-1"})

    assert answer.status == 201
    assert answer.body["id"] == "my-run-1"
    assert api.get("/api/runs/my-run-1").body["id"] == "my-run-1"


def test_a_failing_workflow_is_reported_failed_and_counted(api: Api) -> None:
    answer = api.post("/api/runs", {"workflowId": "api.fails"})

    assert answer.status == 201
    assert answer.body["status"] == "failed"
    assert answer.body["error"]["code"] == "BROKEN"
    assert answer.body["error"]["name"] == "FatalError"
    assert "in fails" in answer.body["error"]["stack"]
    assert api.metrics.counts[m.RUNS_FAILED] == 1


def test_a_parked_run_lists_its_pending_waits(api: Api) -> None:
    run = api.post("/api/runs", {"workflowId": "api.ship", "input": {"id": "o1"}}).body

    assert run["status"] == "waiting"
    [wait] = run["pendingWaitpoints"]
    assert wait["kind"] == "DATETIME"
    assert wait["id"].startswith("sleep:")
    assert wait["registeredAt"] == run["startedAt"]


def test_get_answers_404_for_an_unknown_run(api: Api) -> None:
    answer = api.get("/api/runs/nope")

    assert answer.status == 404
    assert answer.body == {
        "error": "not_found",
        "message": answer.body["message"],
        "requestId": answer.body["requestId"],
    }


def test_run_ids_with_a_slash_are_addressed_url_encoded(api: Api, env: WorkflowTestEnv) -> None:
    api.post("/api/runs", {"workflowId": "api.echo", "runId": "parent/invoke:child:0"})

    answer = api.get("/api/runs/" + quote("parent/invoke:child:0", safe=""))

    assert answer.status == 200
    assert answer.body["id"] == "parent/invoke:child:0"


def test_list_filters_and_pages_with_real_cursors(api: Api, env: WorkflowTestEnv) -> None:
    ids = []
    for n in range(5):
        env.advance(1000)
        body = {"workflowId": "api.echo", "input": n, "tags": ["even" if n % 2 == 0 else "odd"]}
        ids.append(api.post("/api/runs", body).body["id"])
    api.post("/api/runs", {"workflowId": "api.fails", "environment": "preview"})

    page1 = api.get("/api/runs", query={"workflowId": "api.echo", "limit": "2"}).body
    page2 = api.get(
        "/api/runs", query={"workflowId": "api.echo", "limit": "2", "cursor": page1["nextCursor"]}
    ).body
    page3 = api.get(
        "/api/runs", query={"workflowId": "api.echo", "limit": "2", "cursor": page2["nextCursor"]}
    ).body

    listed = [r["id"] for r in page1["runs"] + page2["runs"] + page3["runs"]]
    assert listed == list(reversed(ids))
    assert page3["nextCursor"] is None
    tagged = api.get("/api/runs", query={"tag": "even"}).body["runs"]
    assert {r["id"] for r in tagged} == {ids[0], ids[2], ids[4]}
    failed = api.get("/api/runs", query={"status": "failed", "environment": "preview"}).body
    assert [r["workflowId"] for r in failed["runs"]] == ["api.fails"]
    assert set(failed["runs"][0]) == {
        "id",
        "workflowId",
        "status",
        "environment",
        "tags",
        "startedAt",
        "completedAt",
        "valuesUnavailable",
        "pause",
        "redriveCount",
        "parentRunId",
        "rerunOf",
        "codeVersion",
        "versioning",
        "versionWait",
    }


def test_list_filters_by_start_time_in_ms_or_iso(api: Api, env: WorkflowTestEnv) -> None:
    early = api.post("/api/runs", {"workflowId": "api.echo"}).body
    env.advance(60_000)
    late = api.post("/api/runs", {"workflowId": "api.echo"}).body
    cut = str(late["startedAt"])
    iso = "2023-11-14T22:14:20Z"  # DEFAULT_START_MS + 60 s

    since = api.get("/api/runs", query={"since": cut}).body["runs"]
    until = api.get("/api/runs", query={"until": iso}).body["runs"]

    assert [r["id"] for r in since] == [late["id"]]
    assert [r["id"] for r in until] == [early["id"]]


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ({"limit": "0"}, "limit"),
        ({"limit": "abc"}, "limit"),
        ({"status": "sleeping"}, "status"),
        ({"environment": "staging"}, "environment"),
        ({"since": "yesterday"}, "since"),
        ({"until": "2024-01-01T00:00:00"}, "until"),
        ({"cursor": "not-a-cursor"}, "cursor"),
    ],
)
def test_bad_list_queries_answer_400_naming_the_parameter(
    api: Api, query: dict[str, str], field: str
) -> None:
    answer = api.get("/api/runs", query=query)

    assert answer.status == 400
    assert answer.error == "invalid_query"
    assert field in answer.body["message"] or field == "cursor"


def test_timeline_lists_step_attempts_and_waits(api: Api, env: WorkflowTestEnv) -> None:
    run = api.post("/api/runs", {"workflowId": "api.saga", "input": {"id": "o9"}}).body

    answer = api.get(f"/api/runs/{run['id']}/timeline")

    assert answer.status == 200
    assert answer.body["runId"] == run["id"]
    kinds = [(e["type"], e["id"], e["outcome"]) for e in answer.body["entries"]]
    assert ("step", "reserve", "ok") in kinds
    assert any(t == "wait" and o == "pending" for t, _, o in kinds)
    assert api.get("/api/runs/missing/timeline").status == 404


def test_a_cancelled_runs_timeline_shows_its_wait_ended_with_it(api: Api) -> None:
    run = api.post("/api/runs", {"workflowId": "api.saga", "input": {"id": "o8"}}).body
    cancelled = api.post(f"/api/runs/{run['id']}/cancel", {}).body

    entries = api.get(f"/api/runs/{run['id']}/timeline").body["entries"]

    waits = [e for e in entries if e["type"] == "wait"]
    assert waits and all(e["outcome"] == "cancelled" for e in waits)
    assert all(e["endedAt"] == cancelled["completedAt"] for e in waits)


def test_timeline_gives_names_and_values_on_request_in_pages(api: Api) -> None:
    run = api.post("/api/runs", {"workflowId": "api.callback"}).body
    token = run["metadata"]["token"]
    api.post(f"/api/tokens/{token}", {"payload": {"ok": True}})

    plain = api.get(f"/api/runs/{run['id']}/timeline").body
    valued = api.get(f"/api/runs/{run['id']}/timeline", query={"values": "true"}).body
    first = api.get(f"/api/runs/{run['id']}/timeline", query={"limit": "1"}).body
    rest = api.get(f"/api/runs/{run['id']}/timeline", query={"cursor": first["nextCursor"]}).body

    [wait] = [e for e in plain["entries"] if e["type"] == "wait"]
    assert (wait["name"], wait["tokenId"]) == ("manager", token)
    assert wait["value"] is None and wait["valueSize"] is None
    assert plain["nextCursor"] is None
    [valued_wait] = [e for e in valued["entries"] if e["type"] == "wait"]
    assert valued_wait["value"] == {"ok": True}
    assert valued_wait["valueSize"] == len('{"ok":true}')
    assert first["entries"] + rest["entries"] == plain["entries"]


@pytest.mark.parametrize(
    "query", [{"cursor": "bogus"}, {"limit": "0"}, {"limit": "5000"}, {"values": "maybe"}]
)
def test_timeline_refuses_bad_paging(api: Api, query: dict[str, str]) -> None:
    run = api.post("/api/runs", {"workflowId": "api.echo"}).body

    answer = api.get(f"/api/runs/{run['id']}/timeline", query=query)

    assert (answer.status, answer.error) == (400, "invalid_query")


def test_cancel_with_an_empty_body_cancels(api: Api) -> None:
    run = api.post("/api/runs", {"workflowId": "api.signal"}).body

    answer = api.call("POST", f"/api/runs/{run['id']}/cancel", raw_body="")

    assert answer.status == 200
    assert answer.body["status"] == "cancelled"
    assert answer.body["pendingWaitpoints"] == []


def test_cancel_with_compensation_runs_the_compensations(api: Api) -> None:
    run = api.post("/api/runs", {"workflowId": "api.saga", "input": {"id": "o2"}}).body

    answer = api.post(
        f"/api/runs/{run['id']}/cancel", {"reason": "customer asked", "compensate": True}
    )

    assert answer.status == 200
    assert answer.body["status"] in ("cancelled", "compensated")
    assert RELEASED == ["res-o2"]
    assert [c["stepId"] for c in answer.body["compensations"]] == ["reserve"]


class ReferenceLikeHost:
    """relayflow's host seen through a reference one: the cancel directive is unknown to it
    (dropped from the request) and its answers advertise no capabilities."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def dispatch(self, request: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        status, answer = self.inner.dispatch({k: v for k, v in request.items() if k != "cancel"})
        return status, {k: v for k, v in answer.items() if k != "capabilities"}


def test_cancel_with_compensation_against_a_reference_host_says_none_ran(
    workflows: list[object],
) -> None:
    env = WorkflowTestEnv(workflows=workflows)
    # The engine drives every run through the reference-like host.
    env.engine.dispatchers = DispatcherResolver(default=ReferenceLikeHost(env.dispatcher))
    api = make_api(env)
    run = api.post("/api/runs", {"workflowId": "api.saga", "input": {"id": "o3"}}).body
    RELEASED.clear()

    answer = api.post(f"/api/runs/{run['id']}/cancel", {"reason": "stop", "compensate": True})
    again = api.get(f"/api/runs/{run['id']}").body

    assert (answer.status, answer.body["status"]) == (200, "cancelled")
    assert answer.body["compensations"] == [] and RELEASED == []
    skipped = answer.body["compensationSkipped"]
    assert (skipped["code"], skipped["hostStatus"]) == ("host_cannot_compensate", "waiting")
    assert "no compensation ran" in skipped["message"]
    assert again["compensationSkipped"] == skipped


def test_cancelling_a_finished_run_answers_409_already_terminal(api: Api) -> None:
    run = api.post("/api/runs", {"workflowId": "api.echo"}).body

    answer = api.post(f"/api/runs/{run['id']}/cancel", {})

    assert answer.status == 409
    assert answer.error == "already_terminal"


def test_cancel_of_an_unknown_run_answers_404(api: Api) -> None:
    assert api.post("/api/runs/ghost/cancel", {}).error == "not_found"


def test_an_event_resolves_the_matching_wait_and_completes_the_run(
    api: Api, env: WorkflowTestEnv
) -> None:
    run = api.post("/api/runs", {"workflowId": "api.ship", "input": {"id": "o1"}}).body
    env.advance("10m")

    other = api.post(
        f"/api/runs/{run['id']}/events",
        {"eventType": "order.shipped", "payload": {"orderId": "o2"}, "eventId": "e-0"},
    )
    answer = api.post(
        f"/api/runs/{run['id']}/events",
        {"eventType": "order.shipped", "payload": {"orderId": "o1"}, "eventId": "e-1"},
    )

    assert other.status == 200
    assert other.body["delivery"]["status"] == "buffered"
    assert answer.status == 200
    assert answer.body["delivery"]["status"] == "resolved"
    assert answer.body["status"] == "completed"
    assert answer.body["output"] == {"order": "o1", "shipment": {"orderId": "o1"}}
    assert api.metrics.counts[m.RUNS_COMPLETED] == 1


def test_an_early_event_waits_in_the_inbox(api: Api, env: WorkflowTestEnv) -> None:
    run = api.post("/api/runs", {"workflowId": "api.ship", "input": {"id": "o1"}}).body

    early = api.post(
        f"/api/runs/{run['id']}/events",
        {"eventType": "order.shipped", "payload": {"orderId": "o1"}},
    )
    env.advance("10m")

    assert early.body["delivery"]["status"] == "buffered"
    assert api.get(f"/api/runs/{run['id']}").body["status"] == "completed"


def test_a_signal_resumes_the_run(api: Api) -> None:
    run = api.post("/api/runs", {"workflowId": "api.signal"}).body

    answer = api.post(f"/api/runs/{run['id']}/signals", {"name": "go", "payload": 7})

    assert answer.status == 200
    assert answer.body["output"] == {"go": 7}


def test_tokens_complete_heartbeat_and_fail(api: Api, env: WorkflowTestEnv) -> None:
    first = api.post("/api/runs", {"workflowId": "api.approval"}).body
    second = api.post("/api/runs", {"workflowId": "api.approval"}).body
    [wait] = first["pendingWaitpoints"]
    assert (wait["kind"], wait["tokenId"]) == ("MANUAL", "approve-1")

    beat = api.post(f"/api/runs/{first['id']}/tokens/approve-1/heartbeat")
    done = api.post(f"/api/runs/{first['id']}/tokens/approve-1", {"payload": {"ok": True}})
    failed = api.post(
        f"/api/runs/{second['id']}/tokens/approve-1/fail",
        {"error": {"code": "REJECTED", "message": "no budget"}},
    )

    assert beat.status == 200
    assert beat.body["delivery"]["status"] == "heartbeat"
    assert done.body["status"] == "completed"
    assert done.body["output"] == {"decision": {"ok": True}}
    assert failed.body["status"] == "failed"
    assert "no budget" in str(failed.body["error"])


def test_generated_tokens_are_completed_by_their_id_alone(api: Api) -> None:
    runs = [api.post("/api/runs", {"workflowId": "api.callback"}).body for _ in range(3)]
    tokens = [r["metadata"]["token"] for r in runs]
    [wait] = runs[0]["pendingWaitpoints"]
    assert wait["tokenId"] == tokens[0], "the pending wait shows the id to complete it with"

    beat = api.post(f"/api/tokens/{tokens[0]}/heartbeat")
    done = api.post(f"/api/tokens/{tokens[0]}", {"payload": {"ok": True}})
    failed = api.post(f"/api/tokens/{tokens[1]}/fail", {"error": {"message": "no budget"}})
    scoped = api.post(f"/api/runs/{runs[2]['id']}/tokens/{tokens[2]}", {"payload": 3})

    assert beat.body["delivery"]["status"] == "heartbeat"
    assert (done.status, done.body["id"], done.body["output"]) == (
        200,
        runs[0]["id"],
        {"decision": {"ok": True}},
    )
    assert (failed.body["id"], failed.body["status"]) == (runs[1]["id"], "failed")
    assert scoped.body["output"] == {"decision": 3}


def test_token_ids_that_name_no_run_answer_404_token_not_found(api: Api) -> None:
    first = api.post("/api/runs", {"workflowId": "api.approval"}).body
    other = api.post("/api/runs", {"workflowId": "api.callback"}).body

    authored = api.post("/api/tokens/approve-1", {"payload": 1})
    elsewhere = api.post(
        f"/api/runs/{first['id']}/tokens/{other['metadata']['token']}", {"payload": 1}
    )

    assert (authored.status, authored.error) == (404, "token_not_found")
    assert (elsewhere.status, elsewhere.error) == (404, "token_not_found")
    assert api.get(f"/api/runs/{other['id']}").body["status"] == "waiting"


def test_run_free_token_routes_need_the_runs_write_scope(api: Api) -> None:
    run = api.post("/api/runs", {"workflowId": "api.callback"}).body

    answer = api.post(f"/api/tokens/{run['metadata']['token']}", {"payload": 1}, token=READER)

    assert (answer.status, answer.error) == (403, "forbidden")


def test_deliveries_to_a_finished_run_answer_409_run_terminal(api: Api) -> None:
    run = api.post("/api/runs", {"workflowId": "api.echo"}).body

    for path, body in [
        ("events", {"eventType": "x"}),
        ("signals", {"name": "go"}),
        ("tokens/t1", {"payload": 1}),
        ("tokens/t1/fail", {"error": {"message": "m"}}),
    ]:
        answer = api.post(f"/api/runs/{run['id']}/{path}", body)
        assert (answer.status, answer.error) == (409, "run_terminal"), path


def test_deliveries_to_an_unknown_run_answer_404(api: Api) -> None:
    assert api.post("/api/runs/ghost/signals", {"name": "go"}).error == "not_found"


def test_wait_ms_waits_for_a_handed_off_run_to_settle(workflows: list[object]) -> None:
    # One invocation per drive: a multi-invocation run is handed off still running.
    env = WorkflowTestEnv(workflows=workflows, settings=CoreSettings(inline_invocations=1))
    api = make_api(env)

    quick = api.post("/api/runs", {"workflowId": "api.careful"})
    waited = api.post("/api/runs", {"workflowId": "api.careful", "waitMs": 5000})

    assert (quick.status, quick.body["status"]) == (201, "running")
    assert (waited.status, waited.body["status"]) == (201, "completed")
    assert waited.body["output"] == 3
    # Both runs completed: the first one too, while the second request waited.
    assert api.metrics.counts[m.RUNS_COMPLETED] == 2


def test_wait_ms_is_capped_and_gives_up_in_time(workflows: list[object]) -> None:
    env = WorkflowTestEnv(workflows=workflows, settings=CoreSettings(inline_invocations=1))
    # Time passes but the hand-off alarm never fires.
    frozen = WaitPolicy(
        monotonic_ms=lambda: float(env.now()), sleep_ms=lambda ms: env.clock.advance(int(ms))
    )
    api = make_api(env, wait=frozen)
    started = env.now()

    answer = api.post("/api/runs", {"workflowId": "api.careful", "waitMs": 600_000})

    assert answer.body["status"] == "running"
    assert env.now() - started == 25_000


@pytest.mark.parametrize("token", [READER, WRITER])
def test_scopes_gate_reads_and_writes(api: Api, token: str) -> None:
    read = api.get("/api/runs", token=token)
    write = api.post("/api/runs", {"workflowId": "api.echo"}, token=token)

    if token == READER:
        assert (read.status, write.status) == (200, 403)
    else:
        assert (read.status, write.status) == (403, 201)


def test_a_workflow_no_host_has_is_refused_at_once_with_404(api: Api) -> None:
    answer = api.post("/api/runs", {"workflowId": "no.such.workflow", "input": {}})

    assert answer.status == 404
    assert answer.error == "workflow_not_found"
    assert "no.such.workflow" in answer.body["message"]
    assert api.get("/api/runs").body["runs"] == []


def test_a_workflow_the_registered_manifest_does_not_list_is_refused(
    api: Api, env: WorkflowTestEnv
) -> None:
    env.driver.register_manifest(
        "development",
        {"schemaVersion": 1, "workflows": [{"id": "api.saga"}], "eventFilters": []},
    )

    answer = api.post("/api/runs", {"workflowId": "api.echo", "input": {}})

    assert answer.status == 404
    assert answer.error == "workflow_not_found"
    assert (
        "not in the manifest registered for 'development' (it lists: api.saga)"
        in (answer.body["message"])
    )
    assert api.post("/api/runs", {"workflowId": "api.echo", "environment": "preview"}).status == 201


def test_a_keyed_trigger_of_an_existing_run_is_answered_even_once_unlisted(
    api: Api, env: WorkflowTestEnv
) -> None:
    first = api.post("/api/runs", {"workflowId": "api.echo", "idempotencyKey": "k9"})
    env.driver.register_manifest(
        "development", {"schemaVersion": 1, "workflows": [], "eventFilters": []}
    )

    again = api.post("/api/runs", {"workflowId": "api.echo", "idempotencyKey": "k9"})

    assert (first.status, again.status) == (201, 200)
    assert again.body["id"] == first.body["id"]


def test_timeline_shows_when_a_timed_out_attempt_really_ended() -> None:
    import threading

    from relayflow.sdk.overruns import ABANDONED
    from relayflow.sdk.registry import workflow
    from relayflow.sdk.retry import RetryPolicy

    release, ended = threading.Event(), threading.Event()
    calls: list[int] = []

    def export(_: Any) -> str:
        calls.append(1)
        if len(calls) == 1:  # ignores its timeout, then fails late
            release.wait(10)
            env.advance(3_000)
            ended.set()
            raise RuntimeError("too late")
        return "exported"

    # The retry is due after the api's inline wait: the answer finds the run waiting.
    policy = RetryPolicy(max=2, backoff="fixed", initial=600_000)

    @workflow(id="api.overrun")
    def overrun(data: Any, ctx: Any) -> Any:
        return ctx.step("export", export, data, retry=policy, timeout="50ms")

    env = WorkflowTestEnv(workflows=[overrun])
    api = make_api(env)
    try:
        run = api.post("/api/runs", {"workflowId": "api.overrun"}).body
        assert run["status"] == "waiting"
        [early] = api.get(f"/api/runs/{run['id']}/timeline").body["entries"][:1]
        assert early["error"]["code"] == "TIMEOUT" and early["abandonedEndedAt"] is None
    finally:
        released_at = env.now()
        release.set()
    # The host journals the end once the code's thread is done, before the next attempt.
    assert ended.wait(10) and ABANDONED.wait_clear(f"{run['id']}:export", 10)
    env.advance("10m")
    env.run_until_idle()

    page = api.get(f"/api/runs/{run['id']}/timeline").body
    doc = api.get("/api/openapi.json", token=None).body
    jsonschema.validate(page, {"$ref": "#/components/schemas/TimelineView", **doc})
    entry_schema = doc["components"]["schemas"]["TimelineEntryView"]["properties"]
    assert {"abandonedEndedAt", "abandonedOutcome"} <= set(entry_schema)

    first, second = [e for e in page["entries"] if e["type"] == "step"]
    assert (first["outcome"], first["error"]["code"], second["outcome"]) == ("err", "TIMEOUT", "ok")
    assert first["abandonedOutcome"] == "raised"
    assert first["abandonedEndedAt"] == released_at + 3_000 > first["endedAt"]
    assert second["abandonedEndedAt"] is None and second["abandonedOutcome"] is None
    assert api.get(f"/api/runs/{run['id']}").body["output"] == "exported"
