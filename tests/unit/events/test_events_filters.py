"""``trigger_on``, the process-wide filter registry, and ``build_manifest``'s inputs."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from relayflow.events import (
    EventFilterCompileError,
    build_manifest,
    clear_filter_registry,
    compile_filter,
    manifest_version_id,
    registered_filters,
    trigger_on,
)


@dataclass(frozen=True)
class Workflow:
    id: str
    default_runtime: str | None = None


@pytest.fixture(autouse=True)
def empty_registry() -> Iterator[None]:
    """Each test starts from an empty registry; filters declared elsewhere come back after."""
    saved = registered_filters()
    clear_filter_registry()
    yield
    clear_filter_registry()
    for entry in saved:
        trigger_on(
            entry["eventType"],
            target=entry["targetWorkflowId"],
            where=entry.get("where"),
            input=entry.get("input"),
        )


@pytest.mark.parametrize(
    "target", ["orders.fulfil", {"id": "orders.fulfil"}, Workflow("orders.fulfil")]
)
def test_trigger_on_accepts_every_target_form(target: Any) -> None:
    entry = trigger_on("order.created", target=target)
    assert entry == compile_filter("order.created", {"target": {"id": "orders.fulfil"}})


@pytest.mark.parametrize("target", [None, 5, "", {"name": "x"}, object()])
def test_trigger_on_refuses_targets_without_an_id(target: Any) -> None:
    with pytest.raises(EventFilterCompileError):
        trigger_on("order.created", target=target)
    assert registered_filters() == []


def test_where_and_input_enter_the_entry_as_authored() -> None:
    where = {"gt": [{"path": "data.total"}, {"lit": 100}]}
    mapper = {"object": {"id": {"path": "data.id"}}}
    entry = trigger_on("order.created", target="wf", where=where, input=mapper)
    assert (entry["where"], entry["input"]) == (where, mapper)
    where["gt"][1]["lit"] = 0  # later changes by the caller do not reach the registry
    assert registered_filters()[0]["where"]["gt"][1]["lit"] == 100


def test_an_invalid_where_is_refused_with_the_validator_messages() -> None:
    with pytest.raises(EventFilterCompileError) as info:
        trigger_on("order.created", target="wf", where={"eq": [{"path": "payload.x"}, {"lit": 1}]})
    assert info.value.errors == [
        'eq.0: path root "payload" is not one of data | metadata | name | emittedAt'
    ]


def test_re_declaring_a_filter_replaces_it() -> None:
    first = trigger_on("a", target="wf")
    trigger_on("b", target="wf")
    again = trigger_on("a", target="wf")
    assert again == first
    assert [f["eventType"] for f in registered_filters()] == ["a", "b"]


def test_registered_filters_are_copies() -> None:
    trigger_on("a", target="wf")
    registered_filters()[0]["eventType"] = "changed"
    assert registered_filters()[0]["eventType"] == "a"


def test_build_manifest_collects_the_registry_by_default() -> None:
    entry = trigger_on("a", target="wf")
    manifest = build_manifest(environment="production", workflows=["wf"], built_at=1)
    assert manifest["eventFilters"] == [entry]
    assert manifest["versionId"] == manifest_version_id(manifest)


def test_build_manifest_orders_workflows_by_code_point_and_keeps_duplicates() -> None:
    manifest = build_manifest(
        environment="production",
        workflows=["b", Workflow("B", default_runtime="node"), {"id": "a"}, "b"],
        event_filters=[],
        built_at=1,
    )
    assert [(w["id"], w["defaultRuntime"]) for w in manifest["workflows"]] == [
        ("B", "node"),
        ("a", "edge"),
        ("b", "edge"),
        ("b", "edge"),
    ]


def test_build_manifest_keeps_extra_workflow_fields_and_the_template() -> None:
    schema = {"type": "object"}
    [entry] = build_manifest(
        environment="production",
        workflows=[{"id": "wf", "inputSchema": schema, "config": {"defaultRuntime": "node"}}],
        event_filters=[],
        built_at=1,
    )["workflows"]
    assert entry == {
        "id": "wf",
        "version": "v1",
        "steps": [],
        "schedules": [],
        "defaultRuntime": "node",
        "hasCompensation": False,
        "sourceLocation": {"file": "<runtime>", "line": 0},
        "inputSchema": schema,
    }


def test_built_at_does_not_change_the_version_id() -> None:
    one = build_manifest(environment="production", workflows=["wf"], event_filters=[], built_at=1)
    two = build_manifest(environment="preview", workflows=["wf"], event_filters=[], built_at=2)
    assert one["versionId"] == two["versionId"]
