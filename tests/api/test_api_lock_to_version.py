"""``lockToVersion`` on ``POST /api/runs`` and in the driver: the run's workflowVersion, which
must be the version the environment's manifest lists (409 version_not_found, no run, else),
taken as given without a manifest, and inherited by child runs unless their invoke locks
them to another."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import pytest
from api_harness import Api, make_api

from relayflow.errors import VersionNotFoundError
from relayflow.events.manifest import build_manifest
from relayflow.testing import WorkflowTestEnv

pytestmark = pytest.mark.usefixtures("clean_registry")


def _define() -> list[Any]:
    from relayflow.sdk.registry import workflow

    @workflow(id="lock.child")
    async def child(data: Any, ctx: Any) -> Any:
        return ctx.workflow.version

    @workflow(id="lock.parent")
    async def parent(data: Any, ctx: Any) -> Any:
        inherited = await ctx.invoke("lock.child", {})
        locked = await ctx.invoke("lock.child", {}, lock_to_version="v7")
        return {"own": ctx.workflow.version, "inherited": inherited, "locked": locked}

    return [child, parent]


@pytest.fixture
def api() -> Iterator[Api]:
    yield make_api(WorkflowTestEnv(workflows=_define(), environment="production"))


def _register(api: Api, version: str) -> None:
    manifest = build_manifest(
        environment="production",
        workflows=[{"id": "lock.parent", "version": version}, {"id": "lock.child"}],
        event_filters=[],
        built_at=1,
    )
    answer = api.post("/api/manifests", {"environment": "production", "manifest": manifest})
    assert answer.status == 200, answer.body


def _trigger(api: Api, **body: Any) -> Any:
    return api.post("/api/runs", {"workflowId": "lock.parent", "environment": "production", **body})


def test_without_a_manifest_the_version_is_taken_as_given_and_children_inherit_it(
    api: Api,
) -> None:
    answer = _trigger(api, lockToVersion="v3")

    assert answer.status == 201, answer.body
    assert answer.body["workflowVersion"] == "v3"
    assert answer.body["output"] == {"own": "v3", "inherited": "v3", "locked": "v7"}
    children = [api.get(f"/api/runs/{quote(c, safe='')}").body for c in answer.body["children"]]
    assert [c["workflowVersion"] for c in children] == ["v3", "v7"]


def test_a_trigger_without_lock_to_version_runs_v1(api: Api) -> None:
    answer = _trigger(api)

    assert answer.status == 201 and answer.body["workflowVersion"] == "v1"


def test_the_version_must_be_the_one_the_manifest_lists(api: Api) -> None:
    _register(api, "v2")

    accepted = _trigger(api, lockToVersion="v2", idempotencyKey="k-ok")
    refused = _trigger(api, lockToVersion="v1", idempotencyKey="k-refused")

    assert accepted.status == 201 and accepted.body["workflowVersion"] == "v2"
    assert refused.status == 409
    assert refused.body["error"] == "version_not_found"
    assert "'v2'" in refused.body["message"]
    assert api.get("/api/runs/idem-lock.parent-k-refused").status == 404
    listed = api.get("/api/runs", query={"workflowId": "lock.parent"}).body["runs"]
    assert [r["id"] for r in listed] == [accepted.body["id"]]


def test_an_empty_version_is_a_bad_body(api: Api) -> None:
    answer = _trigger(api, lockToVersion="")

    assert answer.status == 400 and answer.body["error"] == "invalid_body"


def test_the_driver_refuses_with_a_typed_exception(api: Api) -> None:
    _register(api, "v2")

    with pytest.raises(VersionNotFoundError) as refused:
        api.env.trigger("lock.parent", {}, lock_to_version="v9")

    assert refused.value.code == "version_not_found"
    assert api.env.trigger("lock.parent", {}, lock_to_version="v2").workflow_version == "v2"
