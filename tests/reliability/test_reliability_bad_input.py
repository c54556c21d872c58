"""Hand-written hostile requests: malformed, huge, deep, mistyped or non-UTF-8 bodies, unknown
workflows, invalid predicates and manifests. Each is refused (or handled) with a 4xx and the
``{"error", "message"}`` envelope; none reaches a 5xx."""

from __future__ import annotations

from typing import Any

import pytest
from reliability_api import ApiUnderTest, build_api
from reliability_tally import add

KIB = 1024
LIMIT = 256 * KIB


@pytest.fixture(scope="module")
def api() -> ApiUnderTest:
    return build_api()


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def padded(prefix: str, size: int) -> str:
    """A JSON object of exactly ``size`` bytes: ``prefix`` (an object without its closing
    brace) padded with spaces."""
    return prefix + " " * (size - len(prefix.encode()) - 1) + "}"


TRIGGER = "/api/runs"
VALID = '{"workflowId":"reliability.once","input":{"value":1}'
CASES: list[tuple[str, str, str, bytes | str, set[int]]] = [
    ("empty-object", "POST", TRIGGER, "{}", {400}),
    ("truncated", "POST", TRIGGER, '{"workflowId": "reliability.once"', {400}),
    ("trailing-garbage", "POST", TRIGGER, VALID + "} trailing", {400}),
    ("trailing-comma", "POST", TRIGGER, '{"workflowId": "x",}', {400}),
    ("nan", "POST", TRIGGER, '{"workflowId": "reliability.once", "input": NaN}', {400}),
    ("infinity", "POST", TRIGGER, '{"workflowId": "reliability.once", "input": -Infinity}', {400}),
    ("json-array", "POST", TRIGGER, "[1, 2, 3]", {400}),
    ("json-string", "POST", TRIGGER, '"workflowId"', {400}),
    ("json-null", "POST", TRIGGER, "null", {400}),
    ("workflow-id-number", "POST", TRIGGER, '{"workflowId": 7}', {400}),
    ("workflow-id-empty", "POST", TRIGGER, '{"workflowId": ""}', {400}),
    ("tags-string", "POST", TRIGGER, '{"workflowId": "x", "tags": "a,b"}', {400}),
    (
        "tags-too-many",
        "POST",
        TRIGGER,
        '{"workflowId": "x", "tags": [' + ",".join(['"t"'] * 65) + "]}",
        {400},
    ),
    ("wait-string", "POST", TRIGGER, '{"workflowId": "x", "waitMs": "5"}', {400}),
    ("wait-negative", "POST", TRIGGER, '{"workflowId": "x", "waitMs": -1}', {400}),
    ("wait-bool", "POST", TRIGGER, '{"workflowId": "x", "waitMs": true}', {400}),
    ("environment-unknown", "POST", TRIGGER, '{"workflowId": "x", "environment": "prod"}', {400}),
    ("unknown-field", "POST", TRIGGER, '{"workflowId": "x", "workflowID": "y"}', {400}),
    ("snake-case-field", "POST", TRIGGER, '{"workflow_id": "x"}', {400}),
    ("huge-integer", "POST", TRIGGER, '{"workflowId": "x", "input": 1' + "0" * 5000 + "}", {400}),
    ("deep-100k-raw", "POST", TRIGGER, nested(100_000), {400}),
    (
        "deep-100k-input",
        "POST",
        TRIGGER,
        '{"workflowId": "x", "input": ' + nested(100_000) + "}",
        {400},
    ),
    ("non-utf8", "POST", TRIGGER, b'{"workflowId": "\xff\xfe"}', {400}),
    ("latin1", "POST", TRIGGER, '{"workflowId": "caf\u00e9"}'.encode("latin-1"), {400}),
    ("utf16", "POST", TRIGGER, '{"workflowId": "x"}'.encode("utf-16"), {400}),
    ("nul-bytes", "POST", TRIGGER, b"\x00" * 64, {400}),
    ("over-limit", "POST", TRIGGER, padded(VALID, LIMIT + 1), {413}),
    (
        "event-over-limit",
        "POST",
        "/api/events",
        padded('{"environment":"development"', LIMIT + 1),
        {413},
    ),
    ("signal-over-limit", "POST", "/api/runs/r1/signals", padded('{"name":"go"', LIMIT + 1), {413}),
    (
        "manifest-over-limit",
        "POST",
        "/api/manifests",
        padded('{"environment":"development"', LIMIT + 1),
        {413},
    ),
    ("cancel-garbage", "POST", "/api/runs/r1/cancel", "{{{{", {400}),
    ("cancel-wrong-type", "POST", "/api/runs/r1/cancel", '{"compensate": "yes"}', {400}),
    ("event-no-type", "POST", "/api/runs/r1/events", '{"payload": 1}', {400}),
    ("event-lone-surrogate", "POST", "/api/runs/r1/events", '{"eventType": "a\\udc00"}', {400}),
    ("ingest-envelope-missing", "POST", "/api/events", '{"environment": "development"}', {400}),
    (
        "ingest-name-number",
        "POST",
        "/api/events",
        '{"environment": "development", "envelope": '
        '{"name": 5, "emittedAt": "2024-01-01T00:00:00Z", "data": {}}}',
        {400},
    ),
    ("token-fail-garbage", "POST", "/api/runs/r1/tokens/t1/fail", "[]", {400}),
    ("unknown-run", "GET", "/api/runs/no-such-run", b"", {404}),
    ("unknown-run-timeline", "GET", "/api/runs/no-such-run/timeline", b"", {404}),
    ("long-run-id", "GET", "/api/runs/" + "a" * 10_000, b"", {404}),
    ("encoded-slash-run-id", "GET", "/api/runs/..%2F..%2Fetc%2Fpasswd", b"", {404}),
    ("unicode-run-id", "GET", "/api/runs/%F0%9F%92%A5", b"", {404}),
    ("query-limit-huge", "GET", "/api/runs?limit=" + "9" * 40, b"", {400}),
    ("query-limit-text", "GET", "/api/runs?limit=ten", b"", {400}),
    ("query-since-text", "GET", "/api/runs?since=yesterday", b"", {400}),
    ("query-cursor-garbage", "GET", "/api/runs?cursor=%00%FF", b"", {400}),
    ("query-status-unknown", "GET", "/api/runs?status=sleeping", b"", {400}),
    ("unknown-route", "GET", "/api/secrets", b"", {404}),
    ("wrong-method", "DELETE", "/api/runs", b"", {405}),
    ("manifest-env-unknown", "GET", "/api/manifests/staging", b"", {400}),
]


@pytest.mark.parametrize(
    ("method", "path", "body", "expected"),
    [case[1:] for case in CASES],
    ids=[case[0] for case in CASES],
)
def test_hostile_requests_are_refused_with_a_clear_4xx(
    api: ApiUnderTest, method: str, path: str, body: bytes | str, expected: set[int]
) -> None:
    answer = api.send(method, path, body=body or None)

    add("bad_inputs")
    if answer.status >= 500:
        add("server_errors")
    assert answer.status in expected, answer.text[:300]
    assert set(answer.body) >= {"error", "message"}
    assert isinstance(answer.body["error"], str) and answer.body["error"]


def test_a_body_of_exactly_the_limit_is_not_refused_for_its_size(api: ApiUnderTest) -> None:
    answer = api.send("POST", TRIGGER, body=padded(VALID, LIMIT))

    add("bad_inputs")
    assert answer.status == 201, answer.text[:200]
    assert answer.body["status"] == "completed"


def test_a_non_json_content_type_is_refused(api: ApiUnderTest) -> None:
    answer = api.send("POST", TRIGGER, body=VALID + "}", headers={"content-type": "text/plain"})

    add("bad_inputs")
    assert answer.status == 415
    assert answer.body["error"] == "unsupported_media_type"


def test_an_unknown_workflow_is_refused_at_once_with_404(api: ApiUnderTest) -> None:
    answer = api.send("POST", TRIGGER, json_body={"workflowId": "no.such.workflow"})

    add("bad_inputs")
    assert answer.status == 404, answer.text[:200]
    assert answer.body["error"] == "workflow_not_found"
    assert "no.such.workflow" in answer.body["message"]


def manifest() -> dict[str, Any]:
    """A valid registration body (one workflow, one filter), built as users build them."""
    from reliability_workflows import once_workflow

    from relayflow import build_manifest, trigger_on

    where = {"eq": [{"path": "data.kind"}, {"lit": "gift"}]}
    trigger = trigger_on("order.created", target=once_workflow, where=where)
    built = build_manifest(
        environment="development", workflows=[once_workflow], event_filters=[trigger]
    )
    return {"environment": "development", "manifest": built}


BAD_PREDICATES: list[tuple[str, Any]] = [
    ("unknown-operator", {"like": [{"path": "data.kind"}, {"lit": "g%"}]}),
    ("bad-path-root", {"eq": [{"path": "secrets.kind"}, {"lit": 1}]}),
    ("two-operators", {"eq": [{"path": "data.a"}, {"lit": 1}], "neq": [{"lit": 1}, {"lit": 2}]}),
    ("and-not-a-list", {"and": {"exists": {"path": "data.x"}}}),
    ("in-not-a-list", {"in": [{"path": "data.kind"}, {"lit": "gift"}]}),
    ("gt-on-objects", {"gt": [{"path": "data.n"}, {"lit": {"a": 1}}]}),
    ("deep-unknown", {"not": {"not": {"not": {"like": []}}}}),
    ("string", "data.kind == 'gift'"),
]


@pytest.mark.parametrize(
    "predicate", [p for _, p in BAD_PREDICATES], ids=[n for n, _ in BAD_PREDICATES]
)
def test_manifests_with_predicates_that_do_not_validate_are_refused(
    api: ApiUnderTest, predicate: Any
) -> None:
    body = manifest()
    body["manifest"]["eventFilters"][0]["where"] = predicate

    answer = api.send("POST", "/api/manifests", json_body=body)

    add("bad_inputs")
    assert answer.status == 400, answer.text[:300]
    assert answer.body["error"] == "invalid_body"
    assert "where" in answer.text


def test_a_manifest_with_duplicate_workflow_ids_is_refused(api: ApiUnderTest) -> None:
    body = manifest()
    workflows = body["manifest"]["workflows"]
    workflows.append(dict(workflows[0]))

    answer = api.send("POST", "/api/manifests", json_body=body)

    add("bad_inputs")
    assert answer.status == 400, answer.text[:300]
    assert "duplicate workflow id" in answer.text


def test_a_valid_manifest_is_accepted_so_the_refusals_above_are_meaningful(
    api: ApiUnderTest,
) -> None:
    answer = api.send("POST", "/api/manifests", json_body=manifest())

    assert answer.status == 200, answer.text[:300]
    assert answer.body["versionId"]


# ----- product defects found by these inputs (fixes described in the reliability notes) -----


@pytest.mark.parametrize("depth", [300, 900])
def test_deeply_nested_run_input_is_refused_with_400(api: ApiUnderTest, depth: int) -> None:
    body = '{"workflowId": "reliability.once", "input": {"value": ' + nested(depth) + "}}"

    answer = api.send("POST", TRIGGER, body=body)

    add("bad_inputs")
    if answer.status >= 500:
        add("server_errors")
    assert answer.status == 400, answer.text[:200]


def test_deeply_nested_event_payload_is_refused_with_400(api: ApiUnderTest) -> None:
    # In an environment without a manifest: the one registered above lists only one workflow.
    trigger = {"workflowId": "reliability.collector", "input": {"count": 1}}
    run = api.send("POST", TRIGGER, json_body={**trigger, "environment": "preview"})
    body = '{"eventType": "item", "payload": {"n": ' + nested(300) + "}}"

    answer = api.send("POST", f"/api/runs/{run.body['id']}/events", body=body)

    add("bad_inputs")
    if answer.status >= 500:
        add("server_errors")
    assert answer.status == 400, answer.text[:200]


def test_a_number_out_of_float_range_is_refused(api: ApiUnderTest) -> None:
    body = '{"workflowId": "reliability.once", "input": {"value": 1e999}}'

    answer = api.send("POST", TRIGGER, body=body)

    add("bad_inputs")
    assert answer.status == 400, answer.text[:200]
