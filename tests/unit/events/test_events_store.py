"""Manifest registration semantics: validation (fail closed), retention, idempotency, isolation."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from relayflow.adapters.memory.manifests import InMemoryManifestStore
from relayflow.clock import VirtualClock
from relayflow.errors import ValidationError
from relayflow.events import (
    ManifestValidationError,
    build_manifest,
    compile_filter,
    manifest_version_id,
    prepare_manifest,
)


def manifest(*workflow_ids: str, event_type: str = "order.created") -> dict[str, Any]:
    filters = [compile_filter(event_type, {"target": {"id": wf}}) for wf in workflow_ids]
    return build_manifest(
        environment="production", workflows=list(workflow_ids), event_filters=filters, built_at=1
    )


def versions(n: int) -> list[dict[str, Any]]:
    return [manifest(f"wf-{i}") for i in range(n)]


@pytest.fixture
def clock() -> VirtualClock:
    return VirtualClock()


@pytest.fixture
def store(clock: VirtualClock) -> InMemoryManifestStore:
    return InMemoryManifestStore(clock=clock)


def test_register_then_get_current_round_trips(store: InMemoryManifestStore) -> None:
    m = manifest("wf-a")
    assert store.register("production", m) == m["versionId"]
    assert store.get_current("production") == m


def test_get_current_is_none_before_any_registration(store: InMemoryManifestStore) -> None:
    assert store.get_current("production") is None
    assert store.versions("production") == []


def test_a_new_version_becomes_current(store: InMemoryManifestStore) -> None:
    first, second = versions(2)
    store.register("production", first)
    store.register("production", second)
    current = store.get_current("production")
    assert current is not None and current["versionId"] == second["versionId"]


def test_environments_are_isolated(store: InMemoryManifestStore) -> None:
    prod, preview = versions(2)
    store.register("production", prod)
    store.register("preview", preview)
    assert store.get_current("production") == prod
    assert store.get_current("preview") == preview
    assert store.get_current("development") is None


def test_registration_is_idempotent(store: InMemoryManifestStore, clock: VirtualClock) -> None:
    m = manifest("wf-a")
    later_build = {**copy.deepcopy(m), "builtAt": 99}  # same identity, other build time
    assert store.register("production", m) == store.register("production", later_build)
    assert store.versions("production") == [m["versionId"]]
    assert store.get_current("production") == m  # the first stored body is kept


def test_missing_version_id_is_computed(store: InMemoryManifestStore) -> None:
    m = manifest("wf-a")
    without = {k: v for k, v in m.items() if k != "versionId"}
    assert store.register("production", without) == m["versionId"]


def test_get_current_returns_a_copy(store: InMemoryManifestStore) -> None:
    store.register("production", manifest("wf-a"))
    got = store.get_current("production")
    assert got is not None
    got["eventFilters"].clear()
    again = store.get_current("production")
    assert again is not None and len(again["eventFilters"]) == 1


def test_retention_keeps_the_newest_three(
    store: InMemoryManifestStore, clock: VirtualClock
) -> None:
    ms = versions(5)
    for m in ms:
        clock.advance(1000)
        store.register("production", m)
    newest_first = [m["versionId"] for m in reversed(ms)]
    assert store.versions("production") == newest_first[:3]
    assert store.get_version("production", ms[0]["versionId"]) is None
    assert store.get_version("production", ms[4]["versionId"]) == ms[4]


def test_re_registering_an_old_version_makes_it_current_and_never_pruned(
    store: InMemoryManifestStore, clock: VirtualClock
) -> None:
    a, b, c, d = versions(4)
    for m in (a, b, c):
        clock.advance(1000)
        store.register("production", m)
    clock.advance(1000)
    store.register("production", a)  # rollback to the oldest retained version
    clock.advance(1000)
    store.register("production", d)
    assert store.versions("production") == [d["versionId"], a["versionId"], c["versionId"]]
    clock.advance(1000)
    store.register("production", a)
    current = store.get_current("production")
    assert current is not None and current["versionId"] == a["versionId"]


def test_same_millisecond_registrations_keep_registration_order(
    store: InMemoryManifestStore,
) -> None:
    ms = versions(4)
    for m in ms:  # the virtual clock never moves
        store.register("production", m)
    assert store.versions("production") == [m["versionId"] for m in reversed(ms)][:3]


def test_keep_one_retains_only_the_current(clock: VirtualClock) -> None:
    store = InMemoryManifestStore(keep=1, clock=clock)
    first, second = versions(2)
    store.register("production", first)
    store.register("production", second)
    assert store.versions("production") == [second["versionId"]]


def test_keep_below_one_is_refused() -> None:
    with pytest.raises(ValidationError):
        InMemoryManifestStore(keep=0)


def test_an_unknown_environment_is_refused(store: InMemoryManifestStore) -> None:
    with pytest.raises(ValidationError):
        store.register("staging", manifest("wf-a"))


def _with_filter(flt: dict[str, Any]) -> dict[str, Any]:
    m = manifest("wf-a")
    m["eventFilters"].append(flt)
    m["versionId"] = manifest_version_id(m)
    return m


BAD_FILTER = {"id": "ef_x", "eventType": "e", "payloadHash": "h", "targetWorkflowId": "wf-a"}

REFUSED: list[tuple[str, dict[str, Any], str]] = [
    ("where-invalid", _with_filter({**BAD_FILTER, "where": {"bogus": 1}}), "where:"),
    ("where-null", _with_filter({**BAD_FILTER, "where": None}), "where:"),
    ("input-invalid", _with_filter({**BAD_FILTER, "input": {"passthrough": False}}), "input:"),
    ("input-null", _with_filter({**BAD_FILTER, "input": None}), "input:"),
    ("no-event-type", _with_filter({**BAD_FILTER, "eventType": ""}), "eventType"),
    (
        "no-target",
        _with_filter({k: v for k, v in BAD_FILTER.items() if k != "targetWorkflowId"}),
        "targetWorkflowId",
    ),
    ("duplicate-filter-id", _with_filter(dict(manifest("wf-a")["eventFilters"][0])), "duplicate"),
    (
        "duplicate-workflow-ids",
        build_manifest(
            environment="production", workflows=["w", "w"], event_filters=[], built_at=1
        ),
        "duplicate workflow id",
    ),
    ("wrong-version-id", {**manifest("wf-a"), "versionId": "v_test"}, "versionId"),
    (
        "schema-version",
        {**manifest("wf-a"), "schemaVersion": 2, "versionId": None},
        "schemaVersion",
    ),
    (
        "filters-not-a-list",
        {**manifest("wf-a"), "eventFilters": {}, "versionId": None},
        "eventFilters",
    ),
]


@pytest.mark.parametrize(("bad", "needle"), [pytest.param(m, n, id=i) for i, m, n in REFUSED])
def test_invalid_manifests_are_refused_whole(
    store: InMemoryManifestStore, bad: dict[str, Any], needle: str
) -> None:
    with pytest.raises(ManifestValidationError) as info:
        store.register("production", bad)
    assert any(needle in e for e in info.value.errors)
    assert store.get_current("production") is None


def test_a_refused_manifest_leaves_the_current_one(store: InMemoryManifestStore) -> None:
    good = manifest("wf-a")
    store.register("production", good)
    with pytest.raises(ManifestValidationError):
        store.register("production", {**manifest("wf-b"), "versionId": "v_forged"})
    assert store.get_current("production") == good


def test_prepare_manifest_reports_every_problem() -> None:
    bad = {"schemaVersion": 1, "workflows": [{"id": ""}], "eventFilters": [None, {"id": 3}]}
    with pytest.raises(ManifestValidationError) as info:
        prepare_manifest(bad)
    assert info.value.errors == [
        "workflows.0: must be an object with a non-empty string id",
        "eventFilters.0: must be an object",
        "eventFilters.1: id must be a non-empty string",
        "eventFilters.1: eventType must be a non-empty string",
        "eventFilters.1: targetWorkflowId must be a non-empty string",
    ]
