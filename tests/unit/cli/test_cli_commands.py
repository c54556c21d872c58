"""The ``relayflow`` command against a scripted API: requests sent, output and exit codes."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from cli_fake_api import FakeApi, Recorded

from relayflow.cli import main

RUN_WAITING = {
    "id": "run_1",
    "workflowId": "orders.fulfil",
    "status": "waiting",
    "startedAt": 1_700_000_000_000,
    "tags": [],
}
RUN_DONE = {
    **RUN_WAITING,
    "status": "completed",
    "completedAt": 1_700_000_004_200,
    "output": {"label": "L-1"},
}
RUN_FAILED = {
    **RUN_WAITING,
    "status": "failed",
    "completedAt": 1_700_000_001_000,
    "error": {"code": "FATAL", "message": "card declined"},
}
TIMELINE = {
    "timeline": [
        {
            "kind": "step",
            "id": "charge",
            "attempt": 1,
            "startedAt": 1_700_000_000_010,
            "finishedAt": 1_700_000_000_050,
            "outcome": "err",
            "error": {"code": "UNKNOWN", "message": "gateway timeout"},
        },
        {
            "kind": "step",
            "id": "charge",
            "attempt": 2,
            "startedAt": 1_700_000_001_050,
            "finishedAt": 1_700_000_001_090,
            "outcome": "ok",
        },
        {"kind": "wait", "id": "sleep:0", "startedAt": 1_700_000_001_100, "outcome": "waiting"},
    ]
}


def cli(api: FakeApi, *argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(["--url", api.url, *argv], stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def test_trigger_posts_the_run_and_prints_its_id_and_status(fake_api: FakeApi) -> None:
    fake_api.on("POST", "/api/runs", (200, RUN_WAITING))
    code, out, _ = cli(
        fake_api,
        "trigger",
        "orders.fulfil",
        "--input",
        '{"id": "o-1"}',
        "--idempotency-key",
        "k1",
        "--tag",
        "a",
        "--tag",
        "b",
    )
    assert code == 0
    assert out.strip() == "run_1  waiting"
    assert fake_api.last("POST", "/api/runs").body == {
        "workflowId": "orders.fulfil",
        "input": {"id": "o-1"},
        "idempotencyKey": "k1",
        "tags": ["a", "b"],
    }


def test_trigger_reads_input_from_a_file(fake_api: FakeApi, tmp_path: Path) -> None:
    fake_api.on("POST", "/api/runs", (200, RUN_WAITING))
    path = tmp_path / "input.json"
    path.write_text('{"items": [1, 2]}')
    code, _, _ = cli(fake_api, "trigger", "wf", "--input", f"@{path}")
    assert code == 0
    assert fake_api.last("POST", "/api/runs").body["input"] == {"items": [1, 2]}


def test_trigger_input_defaults_to_an_empty_object(fake_api: FakeApi) -> None:
    fake_api.on("POST", "/api/runs", (200, RUN_WAITING))
    cli(fake_api, "trigger", "wf")
    assert fake_api.last("POST", "/api/runs").body == {"workflowId": "wf", "input": {}}


def test_trigger_sends_the_flow_control_options_by_their_wire_names(fake_api: FakeApi) -> None:
    fake_api.on("POST", "/api/runs", (201, RUN_WAITING))
    options = ["--delay", "10m", "--ttl", "1h", "--priority", "5", "--concurrency-key", "acme"]
    debounce = ["--debounce", '{"key": "user", "delay": "30s"}']
    code, _, _ = cli(fake_api, "trigger", "wf", *options, *debounce)
    assert code == 0
    assert fake_api.last("POST", "/api/runs").body == {
        "workflowId": "wf",
        "input": {},
        "delay": "10m",
        "ttl": "1h",
        "priority": 5,
        "concurrencyKey": "acme",
        "debounce": {"key": "user", "delay": "30s"},
    }


def test_token_option_becomes_a_bearer_header(fake_api: FakeApi) -> None:
    fake_api.on("POST", "/api/runs", (200, RUN_WAITING))
    cli(fake_api, "trigger", "wf", "--token", "s3cret")
    assert fake_api.last("POST", "/api/runs").headers["authorization"] == "Bearer s3cret"


def test_url_and_token_come_from_the_environment(
    fake_api: FakeApi, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_api.on("GET", "/api/runs/run_1", (200, RUN_DONE))
    fake_api.on("GET", "/api/runs/run_1/timeline", (200, {"timeline": []}))
    monkeypatch.setenv("RELAYFLOW_URL", fake_api.url)
    monkeypatch.setenv("RELAYFLOW_TOKEN", "from-env")
    out = io.StringIO()
    code = main(["runs", "get", "run_1"], stdout=out, stderr=io.StringIO())
    assert code == 0
    assert fake_api.last("GET", "/api/runs/run_1").headers["authorization"] == "Bearer from-env"


def _stream(status: str, events: list[dict[str, Any]], next_seq: int) -> dict[str, Any]:
    done = status in ("completed", "failed", "cancelled")
    return {"runId": "run_1", "status": status, "events": events, "next": next_seq, "done": done}


STREAM = [
    _stream(
        "waiting",
        [
            {"seq": 1, "type": "step", "id": "charge", "attempt": 1, "status": "started"},
            {
                "seq": 2,
                "type": "step",
                "id": "charge",
                "attempt": 1,
                "status": "err",
                "error": {"code": "UNKNOWN", "message": "gateway timeout"},
            },
        ],
        2,
    ),
    _stream("waiting", [], 2),
    _stream(
        "completed",
        [
            {"seq": 3, "type": "step", "id": "charge", "attempt": 2, "status": "ok"},
            {"seq": 4, "type": "wait", "id": "sleep:0", "kind": "DATETIME", "status": "pending"},
            {"seq": 5, "type": "status", "status": "completed"},
        ],
        5,
    ),
]


def test_trigger_wait_follows_the_run_to_completion(fake_api: FakeApi) -> None:
    fake_api.on("POST", "/api/runs", (200, RUN_WAITING))
    fake_api.on("GET", "/api/runs/run_1", (200, RUN_DONE))
    fake_api.on("GET", "/api/runs/run_1/stream", [(200, s) for s in STREAM])
    fake_api.on("GET", "/api/runs/run_1/timeline", (200, TIMELINE))
    code, out, _ = cli(fake_api, "trigger", "orders.fulfil", "--wait", "--interval", "0")
    assert code == 0
    assert fake_api.last("POST", "/api/runs").body["waitMs"] > 0
    assert "run completed" in out
    assert 'output: {"label":"L-1"}' in out


def test_trigger_wait_exits_3_when_the_run_fails(fake_api: FakeApi) -> None:
    fake_api.on("POST", "/api/runs", (200, RUN_FAILED))
    fake_api.on("GET", "/api/runs/run_1/timeline", (200, TIMELINE))
    code, out, _ = cli(fake_api, "trigger", "orders.fulfil", "--wait")
    assert code == 3
    assert "error: FATAL: card declined" in out


def test_a_refused_request_exits_1_with_the_api_message(fake_api: FakeApi) -> None:
    fake_api.on(
        "POST",
        "/api/runs/run_9/cancel",
        (409, {"error": "already_terminal", "message": "run run_9 already ended"}),
    )
    code, out, err = cli(fake_api, "runs", "cancel", "run_9")
    assert code == 1
    assert out == ""
    assert err.strip() == "error (409): already_terminal: run run_9 already ended"


def test_json_flag_prints_the_api_answer(fake_api: FakeApi) -> None:
    fake_api.on("POST", "/api/runs", (200, RUN_WAITING))
    code, out, _ = cli(fake_api, "trigger", "wf", "--json")
    assert code == 0
    assert json.loads(out) == RUN_WAITING


def test_json_flag_prints_the_refusal_body(fake_api: FakeApi) -> None:
    refusal = {"error": "not_found", "message": "no run run_x"}
    fake_api.on("GET", "/api/runs/run_x", (404, refusal))
    code, out, _ = cli(fake_api, "--json", "runs", "get", "run_x")
    assert code == 1
    assert json.loads(out) == refusal


@pytest.mark.parametrize(
    "argv",
    [
        ["trigger", "wf", "--input", "{not json"],
        ["trigger", "wf", "--input", "@/nonexistent/input.json"],
        ["trigger"],
        ["runs"],
        ["frobnicate"],
        ["token", "fail", "run_1", "tok_1"],
        ["send-event", "x", "--data", "{}", "--metadata", "[1]"],
        ["runs", "list", "--limit", "many"],
    ],
)
def test_usage_errors_exit_2_without_a_request(fake_api: FakeApi, argv: list[str]) -> None:
    code, _, err = cli(fake_api, *argv)
    assert code == 2
    assert err
    assert fake_api.requests == []


def test_an_unreachable_api_exits_1() -> None:
    err = io.StringIO()
    code = main(
        ["--url", "http://127.0.0.1:9", "runs", "get", "r"], stdout=io.StringIO(), stderr=err
    )
    assert code == 1
    assert err.getvalue().startswith("relayflow: no relayflow API at http://127.0.0.1:9: ")


def test_runs_list_prints_a_table_and_passes_filters(fake_api: FakeApi) -> None:
    page = {"runs": [RUN_DONE, {**RUN_FAILED, "id": "run_2", "tags": ["x"]}], "nextCursor": "c2"}
    fake_api.on("GET", "/api/runs", (200, page))
    code, out, _ = cli(
        fake_api, "runs", "list", "--workflow", "orders.fulfil", "--status", "failed", "--tag", "x"
    )
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split() == [
        "RUN",
        "WORKFLOW",
        "STATUS",
        "STARTED",
        "(UTC)",
        "DURATION",
        "TAGS",
        "VERSION",
    ]
    assert lines[1].split()[:3] == ["run_1", "orders.fulfil", "completed"]
    assert "4.2s" in lines[1]
    assert lines[2].split()[-2:] == ["x", "-"], "no code answered the run yet"
    assert out.splitlines()[-1] == (
        "more: relayflow runs list --workflow orders.fulfil --status failed --tag x "
        "--limit 20 --cursor c2"
    )
    query = fake_api.last("GET", "/api/runs").query
    assert query == {
        "workflowId": ["orders.fulfil"],
        "status": ["failed"],
        "tag": ["x"],
        "limit": ["20"],
    }


def test_runs_list_says_when_there_are_none(fake_api: FakeApi) -> None:
    fake_api.on("GET", "/api/runs", (200, {"runs": [], "nextCursor": None}))
    code, out, _ = cli(fake_api, "runs", "list")
    assert (code, out.strip()) == (0, "no runs")


def test_runs_get_shows_status_output_and_timeline(fake_api: FakeApi) -> None:
    fake_api.on("GET", "/api/runs/run_1", (200, RUN_DONE))
    fake_api.on("GET", "/api/runs/run_1/timeline", (200, TIMELINE))
    code, out, _ = cli(fake_api, "runs", "get", "run_1")
    assert code == 0
    assert "status    completed" in out
    assert 'output    {"label":"L-1"}' in out
    assert "duration  4.2s" in out
    rows = [line for line in out.splitlines() if line.startswith(("step", "wait"))]
    assert len(rows) == 3
    assert rows[0].split()[:3] == ["step", "charge", "1"]
    assert "40ms" in rows[0] and "UNKNOWN: gateway timeout" in rows[0]
    assert rows[1].split()[-1] == "ok"
    assert rows[2].split()[-1] == "waiting"


@pytest.mark.parametrize(
    ("durability", "line"),
    [("per_invocation", "durable   per invocation"), ("per_step", "durable   per step")],
)
def test_runs_get_says_how_the_run_was_durable(
    fake_api: FakeApi, durability: str, line: str
) -> None:
    fake_api.on("GET", "/api/runs/run_1", (200, {**RUN_DONE, "durability": durability}))
    fake_api.on("GET", "/api/runs/run_1/timeline", (200, TIMELINE))
    code, out, _ = cli(fake_api, "runs", "get", "run_1")
    assert code == 0
    assert line in out.splitlines()


@pytest.mark.parametrize(
    ("trace", "line"),
    [
        (
            {"traceId": "4bf92f3577b34da6a3ce929d0e0e4736"},
            "trace     4bf92f3577b34da6a3ce929d0e0e4736",
        ),
        (
            {"traceId": "4bf92f35", "traceUrl": "https://jaeger.example/trace/4bf92f35"},
            "trace     4bf92f35  https://jaeger.example/trace/4bf92f35",
        ),
    ],
)
def test_runs_get_prints_the_runs_trace_and_its_link(
    fake_api: FakeApi, trace: dict[str, str], line: str
) -> None:
    fake_api.on("GET", "/api/runs/run_1", (200, {**RUN_DONE, **trace}))
    fake_api.on("GET", "/api/runs/run_1/timeline", (200, TIMELINE))
    code, out, _ = cli(fake_api, "runs", "get", "run_1")
    assert code == 0
    assert line in out.splitlines()


def test_runs_get_shows_when_the_code_of_a_timed_out_attempt_really_ended(
    fake_api: FakeApi,
) -> None:
    given_up = {
        "type": "step",
        "id": "export",
        "attempt": 1,
        "startedAt": 1_700_000_000_000,
        "endedAt": 1_700_000_001_000,
        "outcome": "err",
        "error": {"code": "TIMEOUT", "message": "step 'export' timed out after 1000ms"},
        "abandonedEndedAt": 1_700_000_004_000,
        "abandonedOutcome": "raised",
    }
    fake_api.on("GET", "/api/runs/run_1", (200, RUN_FAILED))
    fake_api.on("GET", "/api/runs/run_1/timeline", (200, {"entries": [given_up]}))
    code, out, _ = cli(fake_api, "runs", "get", "run_1")
    [row] = [line for line in out.splitlines() if line.startswith("step")]
    assert code == 0
    assert "1.0s" in row and "TIMEOUT: step 'export' timed out" in row
    assert "(its code ran on: raised after 4.0s, at 2023-11-14 22:13:24)" in row


def test_runs_get_shows_the_error_of_a_failed_run(fake_api: FakeApi) -> None:
    fake_api.on("GET", "/api/runs/run_1", (200, RUN_FAILED))
    fake_api.on("GET", "/api/runs/run_1/timeline", (200, []))
    code, out, _ = cli(fake_api, "runs", "get", "run_1")
    assert code == 0
    assert "error     FATAL: card declined" in out
    assert "(no steps or waits yet)" in out


def test_run_ids_with_a_slash_stay_one_path_segment(fake_api: FakeApi) -> None:
    fake_api.on("GET", "/api/runs/p%2Finvoke:child:0", (200, RUN_DONE))
    fake_api.on("GET", "/api/runs/p%2Finvoke:child:0/timeline", (200, []))
    code, _, _ = cli(fake_api, "runs", "get", "p/invoke:child:0")
    assert code == 0


def test_runs_watch_prints_each_journal_event_until_the_run_ends(fake_api: FakeApi) -> None:
    fake_api.on("GET", "/api/runs/run_1", [(200, RUN_WAITING), (200, RUN_DONE)])
    fake_api.on("GET", "/api/runs/run_1/stream", [(200, s) for s in STREAM])
    fake_api.on("GET", "/api/runs/run_1/timeline", (200, TIMELINE))
    code, out, _ = cli(fake_api, "runs", "watch", "run_1", "--interval", "0")
    assert code == 0
    events = [line.split(None, 1)[1] for line in out.splitlines() if line.lstrip().startswith("+")]
    assert events == [
        "run waiting",
        "step charge (attempt 1): started",
        "step charge (attempt 1): err  UNKNOWN: gateway timeout",
        "step charge (attempt 2): ok",
        "wait sleep:0: pending",
        "run completed",
    ]
    polls = [r for r in fake_api.requests if r.path == "/api/runs/run_1/stream"]
    assert [r.query["after"] for r in polls] == [["0"], ["2"], ["2"]]
    assert all(0 < int(r.query["waitMs"][0]) <= 20_000 for r in polls)


def test_runs_watch_gives_up_at_its_timeout(fake_api: FakeApi) -> None:
    fake_api.on("GET", "/api/runs/run_1", (200, RUN_WAITING))
    fake_api.on("GET", "/api/runs/run_1/stream", (200, _stream("waiting", [], 0)))
    code, _, err = cli(fake_api, "runs", "watch", "run_1", "--timeout", "0")
    assert code == 3
    assert err.splitlines() == [
        "gave up after 0s: run run_1 is still waiting",
        "follow it with: relayflow runs watch run_1",
    ]


def test_runs_cancel_sends_compensate_and_reason(fake_api: FakeApi) -> None:
    fake_api.on("POST", "/api/runs/run_1/cancel", (200, {**RUN_WAITING, "status": "cancelled"}))
    code, out, _ = cli(fake_api, "runs", "cancel", "run_1", "--compensate", "--reason", "dup")
    assert code == 0
    assert out.strip() == "run_1  cancelled"
    assert fake_api.last("POST", "/api/runs/run_1/cancel").body == {
        "compensate": True,
        "reason": "dup",
    }


def test_send_event_posts_an_envelope_and_lists_matches(fake_api: FakeApi) -> None:
    answer = {
        "ok": True,
        "eventId": "evt_1",
        "matches": [
            {"filterId": "ef_1", "targetWorkflowId": "billing.invoice", "status": "queued",
             "runId": "idem-billing.invoice-ef_1:evt_1"},
            {"filterId": "ef_2", "status": "skipped", "reason": "where_not_matched"},
        ],
    }  # fmt: skip
    fake_api.on("POST", "/api/events", (200, answer))
    code, out, _ = cli(
        fake_api,
        "send-event",
        "order.paid",
        "--data",
        '{"amount": 120}',
        "--env",
        "preview",
        "--metadata",
        '{"eventId": "e-1"}',
        "--idempotency-key",
        "ik",
    )
    assert code == 0
    body = fake_api.last("POST", "/api/events").body
    assert body["environment"] == "preview"
    assert body["idempotencyKey"] == "ik"
    envelope = body["envelope"]
    assert envelope["name"] == "order.paid"
    assert envelope["data"] == {"amount": 120}
    assert envelope["metadata"] == {"eventId": "e-1"}
    assert envelope["emittedAt"].endswith("Z")
    assert "queued   billing.invoice  idem-billing.invoice-ef_1:evt_1" in out
    assert "skipped  ef_2  where_not_matched" in out


def test_send_event_without_a_manifest_exits_1(fake_api: FakeApi) -> None:
    answer = {"ok": False, "reason": "manifest_not_registered", "message": "none for preview"}
    fake_api.on("POST", "/api/events", (200, answer))
    code, _, err = cli(fake_api, "send-event", "x", "--env", "preview")
    assert code == 1
    assert "manifest_not_registered" in err


def test_send_event_to_a_run_posts_to_its_events(fake_api: FakeApi) -> None:
    fake_api.on("POST", "/api/runs/run_1/events", (200, RUN_WAITING))
    code, out, _ = cli(fake_api, "send-event", "shipment.created", "--run", "run_1", "--data", "7")
    assert code == 0
    assert out.strip() == "run_1  waiting"
    assert fake_api.last("POST", "/api/runs/run_1/events").body == {
        "eventType": "shipment.created",
        "payload": 7,
    }


@pytest.mark.parametrize(
    ("argv", "path", "body"),
    [
        (
            ["signal", "run_1", "approve", "--payload", '{"by": "ann"}'],
            "/api/runs/run_1/signals",
            {"name": "approve", "payload": {"by": "ann"}},
        ),
        (["signal", "run_1", "go"], "/api/runs/run_1/signals", {"name": "go", "payload": None}),
        (
            ["token", "complete", "run_1", "tok_0", "--payload", "true"],
            "/api/runs/run_1/tokens/tok_0",
            {"payload": True},
        ),
        (
            ["token", "fail", "run_1", "tok_0", "--message", "no", "--code", "DENIED"],
            "/api/runs/run_1/tokens/tok_0/fail",
            {"error": {"message": "no", "code": "DENIED"}},
        ),
        (["token", "heartbeat", "run_1", "tok_0"], "/api/runs/run_1/tokens/tok_0/heartbeat", {}),
        (
            ["token", "complete", "rft1.cnVuXzE.tok_0", "--payload", "1"],
            "/api/tokens/rft1.cnVuXzE.tok_0",
            {"payload": 1},
        ),
        (
            ["token", "fail", "rft1.cnVuXzE.tok_0", "--message", "no"],
            "/api/tokens/rft1.cnVuXzE.tok_0/fail",
            {"error": {"message": "no"}},
        ),
        (
            ["token", "heartbeat", "rft1.cnVuXzE.tok_0"],
            "/api/tokens/rft1.cnVuXzE.tok_0/heartbeat",
            {},
        ),
    ],
)
def test_injections_post_to_the_run(
    fake_api: FakeApi, argv: list[str], path: str, body: dict[str, Any]
) -> None:
    fake_api.on("POST", path, (200, RUN_WAITING))
    code, out, _ = cli(fake_api, *argv)
    assert code == 0
    assert out.strip() == "run_1  waiting"
    assert fake_api.last("POST", path).body == body


def test_manifest_show_lists_workflows_and_filters(fake_api: FakeApi) -> None:
    manifest = {
        "versionId": "abcd",
        "builtAt": 1_700_000_000_000,
        "workflows": [{"id": "orders.fulfil", "version": "v1"}],
        "eventFilters": [
            {"id": "ef_1", "eventType": "order.paid", "targetWorkflowId": "billing.invoice",
             "where": {"gt": ["data.amount", 100]}},
        ],
    }  # fmt: skip
    fake_api.on(
        "GET",
        "/api/manifests/preview",
        (200, {"environment": "preview", "versionId": "abcd", "manifest": manifest}),
    )
    code, out, _ = cli(fake_api, "manifest", "show", "--env", "preview")
    assert code == 0
    assert "version      abcd" in out
    assert "built        2023-11-14 22:13:20 UTC" in out
    assert "  orders.fulfil  (v1)" in out
    assert 'ef_1  order.paid -> billing.invoice  where {"gt":["data.amount",100]}' in out


def _echo(req: Recorded) -> tuple[int, Any]:
    return 200, {"method": req.method, "path": req.path}


def test_options_after_the_subcommand_override_the_defaults(fake_api: FakeApi) -> None:
    fake_api.on("GET", "/api/manifests/development", _echo)
    out = io.StringIO()
    code = main(
        ["manifest", "show", "--url", fake_api.url, "--json"], stdout=out, stderr=io.StringIO()
    )
    assert code == 0
    assert json.loads(out.getvalue()) == {"method": "GET", "path": "/api/manifests/development"}


APP_MODULE = """
from relayflow import trigger_on, workflow


@workflow(id="cli_app.greet")
async def greet(name, ctx):
    return f"hello {name}"


trigger_on("user.joined", target=greet, input={"path": "data.name"})
"""


def test_manifest_push_registers_the_apps_workflows_and_filters(
    fake_api: FakeApi, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "cli_push_app.py").write_text(APP_MODULE)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("sys.path", list(__import__("sys").path))
    fake_api.on("POST", "/api/manifests", (200, {"ok": True, "versionId": "v-123"}))
    code, out, _ = cli(fake_api, "manifest", "push", "--app", "cli_push_app", "--env", "preview")
    assert code == 0
    assert out.startswith("registered manifest v-123 for preview:")
    body = fake_api.last("POST", "/api/manifests").body
    assert body["environment"] == "preview"
    manifest = body["manifest"]
    assert "cli_app.greet" in [w["id"] for w in manifest["workflows"]]
    assert ("user.joined", "cli_app.greet") in [
        (f["eventType"], f["targetWorkflowId"]) for f in manifest["eventFilters"]
    ]
    assert manifest["versionId"]


def test_manifest_push_of_a_missing_module_is_a_usage_error(fake_api: FakeApi) -> None:
    code, _, err = cli(fake_api, "manifest", "push", "--app", "no_such_module_here")
    assert code == 2
    assert "cannot import app module 'no_such_module_here'" in err
    assert fake_api.requests == []


def test_runs_get_shows_pending_waits_children_and_compensations(fake_api: FakeApi) -> None:
    run = {
        **RUN_WAITING,
        "pendingWaitpoints": [
            {"id": "token:manager-approval", "kind": "MANUAL", "tokenId": "manager-approval"},
            {"id": "signal:finance.approved:1", "kind": "SIGNAL", "signalName": "finance.approved"},
        ],
        "children": ["run_1/invoke:orders.label:2"],
        "compensations": [{"stepId": "charge-card", "status": "ok"}],
    }
    fake_api.on("GET", "/api/runs/run_1", (200, run))
    fake_api.on("GET", "/api/runs/run_1/timeline", (200, {"entries": []}))
    code, out, _ = cli(fake_api, "runs", "get", "run_1")
    assert code == 0
    assert (
        "waits on  token:manager-approval  "
        "(complete with: relayflow token complete run_1 manager-approval)" in out
    )
    assert "          signal:finance.approved:1  (signal finance.approved)" in out
    assert "children  run_1/invoke:orders.label:2" in out
    assert "undone    charge-card: ok" in out


def test_an_injection_prints_what_became_of_the_delivery(fake_api: FakeApi) -> None:
    answer = {**RUN_WAITING, "delivery": {"status": "buffered"}}
    fake_api.on("POST", "/api/runs/run_1/signals", (200, answer))
    code, out, _ = cli(fake_api, "signal", "run_1", "go")
    assert (code, out.strip()) == (0, "run_1  waiting  (delivery buffered)")


def test_the_next_page_hint_keeps_the_limit_and_every_filter(fake_api: FakeApi) -> None:
    fake_api.on("GET", "/api/runs", (200, {"runs": [RUN_DONE], "nextCursor": "c 3"}))
    code, out, _ = cli(
        fake_api, "runs", "list", "--limit", "2", "--env", "preview",
        "--since", "2026-01-01T00:00:00Z", "--until", "1700000000000",
    )  # fmt: skip
    assert code == 0
    assert out.splitlines()[-1] == (
        "more: relayflow runs list --env preview --since 2026-01-01T00:00:00Z "
        "--until 1700000000000 --limit 2 --cursor 'c 3'"
    )


def test_trigger_wait_that_gives_up_prints_the_run_id(fake_api: FakeApi) -> None:
    fake_api.on("POST", "/api/runs", (201, RUN_WAITING))
    fake_api.on("GET", "/api/runs/run_1", (200, RUN_WAITING))
    fake_api.on("GET", "/api/runs/run_1/timeline", (200, {"timeline": []}))
    code, _, err = cli(fake_api, "trigger", "orders.fulfil", "--wait", "--timeout", "0")
    assert code == 3
    assert "gave up after 0s: run run_1 is still waiting" in err
    assert "follow it with: relayflow runs watch run_1" in err


def test_an_app_with_a_syntax_error_is_a_usage_error(
    fake_api: FakeApi, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "cli_broken_app.py").write_text("def broken(:\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("sys.path", list(__import__("sys").path))
    code, _, err = cli(fake_api, "manifest", "push", "--app", "cli_broken_app")
    assert code == 2
    assert "app module 'cli_broken_app' has a syntax error: " in err
    assert "cli_broken_app.py:1:" in err
    assert fake_api.requests == []
