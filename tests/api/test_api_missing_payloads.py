"""A run whose values the payload bucket no longer holds is still read and listed over HTTP:
the detail answers 200 and names each value it cannot give, the listing is unaffected."""

from __future__ import annotations

import time
from typing import Any

import boto3
import pytest
from aws_http import REGION, HttpApi, another_api, serve_api

BIG = 100_000
#: Over what a DynamoDB item holds: the whole journal entry goes to the payload bucket.
HUGE = 360_000
#: Over the inline cap (held by reference), under the timeline's per-entry cap (fetched).
STEP = 50_000


@pytest.fixture(scope="module")
def big_workflows() -> None:
    from relayflow.sdk.registry import workflow

    def grow(data: Any) -> Any:
        return {"blob": "s" * STEP}

    @workflow(id="payloads.parked")
    async def parked(data: Any, ctx: Any) -> Any:
        grown = await ctx.step("grow", grow, data)
        await ctx.wait_for_signal("go")
        return {"size": len(grown["blob"])}

    def huge(data: Any) -> Any:
        return "h" * HUGE

    @workflow(id="inline.big")
    async def inline_big(data: Any, ctx: Any) -> Any:
        await ctx.step("huge", huge, data)
        await ctx.wait_for_signal("go")

    @workflow(id="payloads.done")
    async def done(data: Any, ctx: Any) -> Any:
        return {"echo": data}


def _empty_the_bucket(api: HttpApi) -> list[str]:
    s3 = boto3.client("s3", region_name=REGION)
    bucket = api.settings.require("payload_bucket")
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=bucket).get("Contents", [])]
    for key in keys:
        s3.delete_object(Bucket=bucket, Key=key)
    return keys


def _unavailable(body: dict[str, Any]) -> dict[str, str]:
    return {item["path"]: item["reason"] for item in body["valuesUnavailable"]}


def test_a_run_whose_payloads_are_gone_is_read_and_listed(big_workflows: None) -> None:
    with serve_api() as api:
        data = {"blob": "i" * BIG}
        parked = api.post("/api/runs", {"workflowId": "payloads.parked", "input": data})
        assert parked.status_code == 201, parked.text
        done = api.post("/api/runs", {"workflowId": "payloads.done", "input": data})
        assert done.json()["status"] == "completed", done.text
        small = api.post("/api/runs", {"workflowId": "payloads.done", "input": 1})
        parked_id, done_id = parked.json()["id"], done.json()["id"]
        waits = api.post("/api/runs", {"workflowId": "inline.big"}).json()
        assert waits["status"] == "waiting", waits
        before = api.get(f"/api/runs/{parked_id}").json()
        assert before["input"] == data and before["valuesUnavailable"] == []
        assert len(_empty_the_bucket(api)) >= 2  # the input, output and step output
        with another_api(api.settings) as fresh:
            _read_and_list(fresh, parked_id, done_id, small.json()["id"])
            _read_a_lost_entry(fresh, waits["id"])


def _read_a_lost_entry(api: HttpApi, run_id: str) -> None:
    read = api.get(f"/api/runs/{run_id}")
    assert read.status_code == 200, read.text
    lost = {"/journal/stepResults/huge": "payload_not_found"}
    assert _unavailable(read.json()) == lost
    timeline = api.get(f"/api/runs/{run_id}/timeline?values=true")
    assert timeline.status_code == 200, timeline.text
    assert _unavailable(timeline.json()) == lost


def _read_and_list(api: HttpApi, parked_id: str, done_id: str, small_id: str) -> None:
    read = api.get(f"/api/runs/{parked_id}")
    assert read.status_code == 200, read.text
    assert read.json()["input"] is None
    assert read.json()["status"] == "waiting"
    assert _unavailable(read.json()) == {"/input": "payload_not_found"}
    ended = api.get(f"/api/runs/{done_id}")
    assert ended.status_code == 200, ended.text
    assert (ended.json()["input"], ended.json()["output"]) == (None, None)
    assert _unavailable(ended.json()) == {
        "/input": "payload_not_found",
        "/output": "payload_not_found",
    }
    listed = api.get("/api/runs?limit=10")
    assert listed.status_code == 200, listed.text
    marked = {r["id"]: _unavailable(r) for r in listed.json()["runs"]}
    assert marked[parked_id] == {"/input": "payload_not_found"}
    # The listing marks what it reads: the output, a step host's pointer, is read by getRun.
    assert marked[done_id] == {"/input": "payload_not_found"}
    assert marked[small_id] == {}
    timeline = api.get(f"/api/runs/{parked_id}/timeline?values=true")
    assert timeline.status_code == 200, timeline.text
    (grow,) = [e for e in timeline.json()["entries"] if e["id"] == "grow"]
    assert (grow["outcome"], grow["value"]) == ("ok", None)
    assert grow["valueUnavailable"] == "payload_not_found"
    stream = api.get(f"/api/runs/{parked_id}/stream?waitMs=0")
    assert stream.status_code == 200, stream.text
    # Reads never change the run: it still waits where it did.
    assert api.get(f"/api/runs/{parked_id}").json()["pendingWaitpoints"][0]["id"] == ("signal:go:0")


def test_a_value_read_back_is_not_marked(big_workflows: None) -> None:
    with serve_api() as api:
        data = {"blob": "i" * BIG}
        run = api.post("/api/runs", {"workflowId": "payloads.parked", "input": data}).json()
        deadline = time.monotonic() + 10
        entries: list[dict[str, Any]] = []
        while not [e for e in entries if e["id"] == "grow"]:
            assert time.monotonic() < deadline
            entries = api.get(f"/api/runs/{run['id']}/timeline?values=true").json()["entries"]
        (grow,) = [e for e in entries if e["id"] == "grow"]
        assert grow["valueUnavailable"] is None and grow["value"] == {"blob": "s" * STEP}
