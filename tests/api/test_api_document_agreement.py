"""The API refuses exactly what its OpenAPI document forbids: each value below is checked
against the schema the document gives it (JSON Schema 2020-12 with formats) and sent over
HTTP; a value the document allows is accepted, a value it forbids answers 400."""

from __future__ import annotations

from typing import Any

import pytest
from api_harness import Api
from jsonschema import Draft202012Validator


def _document(api: Api) -> dict[str, Any]:
    answer = api.get("/api/openapi.json", token=None)
    assert answer.status == 200
    return answer.body  # type: ignore[no-any-return]


def _parameter(api: Api, path: str, method: str, name: str) -> Draft202012Validator:
    operation = _document(api)["paths"][path][method]
    (schema,) = [p["schema"] for p in operation["parameters"] if p["name"] == name]
    return Draft202012Validator(schema, format_checker=Draft202012Validator.FORMAT_CHECKER)


def _body(api: Api, path: str) -> Draft202012Validator:
    doc = _document(api)
    schema = doc["paths"][path]["post"]["requestBody"]["content"]["application/json"]["schema"]
    root = {**schema, "components": doc["components"]}
    return Draft202012Validator(root, format_checker=Draft202012Validator.FORMAT_CHECKER)


def _agrees(allowed: bool, status: int, accepted: set[int]) -> None:
    assert status in accepted if allowed else status == 400


@pytest.mark.parametrize(
    "value",
    [
        "",
        "0",
        "1700000000000",
        "999999999999999",
        "1234567890123456",
        " 1700000000000",
        "\uff11\uff17\uff10\uff10",  # full-width digits: str.isdigit() says yes
        "2026-12-05T10:00:00Z",
        "2026-12-05T10:00:00.123456789+05:30",
        "0001-01-01T00:00:00+05:00",
        "9999-12-31T23:59:59-05:00",
        "2024-02-29T00:00:00Z",
        "2023-02-29T00:00:00Z",
        "2026-12-05T10:00Z",
        "2026-12-05T10:00:00",
        "2026-12-05 10:00:00Z",
        "2026-12-05T10:00:00+24:00",
        "2026-12-05T10:00:00+05:60",
        "2026-12-05T10:60:00Z",
        "yesterday",
    ],
)
@pytest.mark.parametrize("name", ["since", "until"])
def test_list_instants_are_refused_exactly_when_the_document_forbids_them(
    api: Api, name: str, value: str
) -> None:
    schema = _parameter(api, "/api/runs", "get", name)

    answer = api.get("/api/runs", query={name: value})

    _agrees(schema.is_valid(value), answer.status, {200})


def test_an_instant_in_rfc_3339_selects_the_same_runs_as_its_epoch_ms(api: Api) -> None:
    started = api.post("/api/runs", {"workflowId": "api.echo", "input": 1}).body["startedAt"]
    assert started == 1_700_000_000_000  # the virtual clock's start: 2023-11-14T22:13:20Z

    by_ms = api.get("/api/runs", query={"since": str(started)}).body["runs"]
    by_time = api.get("/api/runs", query={"since": "2023-11-14T23:13:20.000+01:00"}).body["runs"]
    later = api.get("/api/runs", query={"since": "2023-11-14T22:13:20.001Z"}).body["runs"]

    assert len(by_ms) == 1
    assert by_time == by_ms
    assert later == []


@pytest.mark.parametrize(
    "value", ["", "0", "0.", "1764928800000.72756e", "0.7", "0.7X", "abc", "W10", "0.ff", "é"]
)
def test_list_cursors_are_refused_exactly_when_the_document_forbids_them(
    api: Api, value: str
) -> None:
    schema = _parameter(api, "/api/runs", "get", "cursor")

    answer = api.get("/api/runs", query={"cursor": value})

    _agrees(schema.is_valid(value), answer.status, {200})


def test_list_cursors_page_through_every_run_once(api: Api) -> None:
    started = [api.post("/api/runs", {"workflowId": "api.echo", "input": i}) for i in range(5)]
    seen: list[str] = []
    cursor = None
    while True:
        page = api.get("/api/runs", query={"limit": "2", **({"cursor": cursor} if cursor else {})})
        seen += [run["id"] for run in page.body["runs"]]
        cursor = page.body.get("nextCursor")
        if cursor is None:
            break
        assert _parameter(api, "/api/runs", "get", "cursor").is_valid(cursor)

    assert sorted(seen) == sorted(answer.body["id"] for answer in started)


@pytest.mark.parametrize("value", ["", "0", "1", "2", "999999999", "1000000000", "-1", "é", "MQ"])
def test_timeline_cursors_are_refused_exactly_when_the_document_forbids_them(
    api: Api, value: str
) -> None:
    run = api.post("/api/runs", {"workflowId": "api.echo", "input": 1}).body
    schema = _parameter(api, "/api/runs/{run_id}/timeline", "get", "cursor")

    answer = api.get(f"/api/runs/{run['id']}/timeline", query={"cursor": value})

    _agrees(schema.is_valid(value), answer.status, {200})


@pytest.mark.parametrize("key", ["k-1", "!~", "a b", "é", "k" * 255, "k" * 256, "tab\there"])
def test_idempotency_keys_are_refused_exactly_when_the_document_forbids_them(
    api: Api, key: str
) -> None:
    schema = _parameter(api, "/api/runs", "post", "Idempotency-Key")

    answer = api.post("/api/runs", {"workflowId": "api.echo"}, headers={"Idempotency-Key": key})

    _agrees(schema.is_valid(key), answer.status, {201})


@pytest.mark.parametrize("wait_ms", [0, 1, 1.0, 250.0, 1.5, -1, -1.0, "1", True, None])
def test_wait_ms_is_refused_exactly_when_the_document_forbids_it(api: Api, wait_ms: Any) -> None:
    body = {"workflowId": "api.echo", "waitMs": wait_ms}
    schema = _body(api, "/api/runs")

    answer = api.post("/api/runs", body)

    _agrees(schema.is_valid(body), answer.status, {201})


def test_an_integral_float_wait_ms_waits_like_the_integer(api: Api) -> None:
    answer = api.post("/api/runs", {"workflowId": "api.ship", "input": {"id": "o1"}, "waitMs": 5.0})

    assert answer.status == 201
    assert answer.body["status"] == "waiting"


_ENVELOPE = {"name": "order.shipped", "emittedAt": "2026-12-05T10:00:00Z"}


@pytest.mark.parametrize(
    "body",
    [
        {"environment": "development", "envelope": _ENVELOPE},
        {"environment": "development", "envelope": {**_ENVELOPE, "metadata": {"a": 1}}},
        {"environment": "development", "envelope": {**_ENVELOPE, "metadata": [1]}},
        {"environment": "development", "envelope": {**_ENVELOPE, "metadata": None}},
        {"environment": "development", "envelope": {**_ENVELOPE, "name": ""}},
        {"environment": "development", "envelope": {**_ENVELOPE, "emittedAt": ""}},
        {"environment": "development", "envelope": {**_ENVELOPE, "extra": True}},
        {"environment": "development", "envelope": _ENVELOPE, "idempotencyKey": "k"},
        {"environment": "development", "envelope": _ENVELOPE, "idempotencyKey": None},
        {"environment": "development", "envelope": _ENVELOPE, "unknown": 1},
        {"environment": "staging", "envelope": _ENVELOPE},
    ],
)
def test_event_bodies_are_refused_exactly_when_the_document_forbids_them(
    api: Api, body: dict[str, Any]
) -> None:
    schema = _body(api, "/api/events")

    answer = api.post("/api/events", body)

    _agrees(schema.is_valid(body), answer.status, {200})
