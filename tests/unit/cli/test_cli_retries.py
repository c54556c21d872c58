"""The CLI's writes are retry-safe: one Idempotency-Key per command, reused on retry."""

from __future__ import annotations

import pytest
from cli_fake_api import FakeApi

from relayflow.cli.client import ApiClient, ApiRequestError


def client(api: FakeApi, delays: list[float]) -> ApiClient:
    return ApiClient(url=api.url, token="t", sleep=delays.append)


def test_a_write_is_retried_with_the_same_key(fake_api: FakeApi) -> None:
    run = {"id": "r1", "status": "completed"}
    fake_api.on(
        "POST",
        "/api/runs",
        [(503, {"error": "unavailable", "message": "busy"}), (201, run)],
    )
    delays: list[float] = []
    assert client(fake_api, delays).trigger("wf", {"n": 1})["id"] == "r1"
    sent = [r for r in fake_api.requests if r.path == "/api/runs"]
    keys = {r.headers.get("idempotency-key") for r in sent}
    assert len(sent) == 2 and len(keys) == 1 and None not in keys
    assert delays == [1.0]


def test_each_command_gets_its_own_key(fake_api: FakeApi) -> None:
    fake_api.on("POST", "/api/runs", (201, {"id": "r", "status": "completed"}))
    api = client(fake_api, [])
    api.trigger("wf", None)
    api.trigger("wf", None)
    keys = [r.headers.get("idempotency-key") for r in fake_api.requests]
    assert len(set(keys)) == 2


def test_a_refusal_is_not_retried(fake_api: FakeApi) -> None:
    fake_api.on("POST", "/api/runs", (422, {"error": "idempotency_key_reused", "message": "m"}))
    delays: list[float] = []
    with pytest.raises(ApiRequestError) as caught:
        client(fake_api, delays).trigger("wf", None)
    assert caught.value.status == 422
    assert len(fake_api.requests) == 1 and delays == []
