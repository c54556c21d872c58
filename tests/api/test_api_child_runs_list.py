"""``GET /api/runs`` and child runs: each listed run names its parent (``parentRunId``), and
``?parent=`` lists the children one run started, newest first, paged like any listing."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from api_harness import Api, make_api

from relayflow.testing import WorkflowTestEnv

pytestmark = pytest.mark.usefixtures("clean_registry")


def _define() -> list[Any]:
    from relayflow.sdk.registry import workflow

    @workflow(id="tree.leaf")
    async def leaf(data: Any, ctx: Any) -> Any:
        return data

    @workflow(id="tree.root")
    async def root(data: Any, ctx: Any) -> Any:
        return [await ctx.invoke("tree.leaf", n) for n in range(data)]

    return [leaf, root]


@pytest.fixture
def api() -> Iterator[Api]:
    yield make_api(WorkflowTestEnv(workflows=_define()))


def test_listed_runs_name_their_parent_and_parent_lists_the_children(api: Api) -> None:
    first = api.post("/api/runs", {"workflowId": "tree.root", "input": 3}).body
    second = api.post("/api/runs", {"workflowId": "tree.root", "input": 1}).body
    assert first["status"] == second["status"] == "completed"
    assert len(first["children"]) == 3

    listed = {r["id"]: r for r in api.get("/api/runs").body["runs"]}
    assert listed[first["id"]]["parentRunId"] is None
    for child in first["children"]:
        assert listed[child]["parentRunId"] == first["id"]

    pages: list[list[str]] = []
    cursor: str | None = None
    while True:
        query = {"parent": first["id"], "limit": "2", **({"cursor": cursor} if cursor else {})}
        page = api.get("/api/runs", query=query).body
        pages.append([r["id"] for r in page["runs"]])
        cursor = page["nextCursor"]
        if cursor is None:
            break
    assert sorted(run_id for page in pages for run_id in page) == sorted(first["children"])
    assert [len(p) for p in pages] == [2, 1]
    only = api.get("/api/runs", query={"parent": second["id"]}).body["runs"]
    assert [r["id"] for r in only] == second["children"]
    assert api.get("/api/runs", query={"parent": second["children"][0]}).body["runs"] == []


def test_an_empty_parent_is_refused(api: Api) -> None:
    answer = api.get("/api/runs", query={"parent": ""})
    assert answer.status == 400
    assert answer.body["error"] == "invalid_query"
