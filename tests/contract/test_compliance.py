"""The reference compliance suite (reference §6.3), all 23 tests, over every driver."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import contract_workflows as wf
import pytest

from relayflow.errors import DriverShutdownError
from relayflow.events import ManifestValidationError, build_manifest, trigger_on
from relayflow.testing import DriverHarness

MakeEnv = Callable[..., DriverHarness]
EMITTED = "2026-05-09T13:22:08.000Z"


def manifest(filters: list[dict[str, Any]], version: str | None = None) -> dict[str, Any]:
    built = build_manifest(
        environment="development", workflows=[wf.echo], event_filters=filters, built_at=0
    )
    if version is not None:
        built["versionId"] = version
    return built


def raw_filter(filter_id: str, event_type: str, target: str, **extra: Any) -> dict[str, Any]:
    return {
        "id": filter_id,
        "eventType": event_type,
        "payloadHash": filter_id[3:],
        "targetWorkflowId": target,
        **extra,
    }


# registerManifest / getManifest ------------------------------------------------------------


def test_01_register_returns_the_manifest_version_id(make_env: MakeEnv) -> None:
    env = make_env(workflows=[wf.echo])
    m = manifest([])
    assert env.driver.register_manifest("production", m) == m["versionId"]


def test_02_get_manifest_returns_the_registered_manifest(make_env: MakeEnv) -> None:
    env = make_env(workflows=[wf.echo])
    m = manifest([])
    env.driver.register_manifest("production", m)
    found = env.driver.get_manifest("production")
    assert found is not None and found["versionId"] == m["versionId"]


def test_03_get_manifest_is_none_when_nothing_is_registered(make_env: MakeEnv) -> None:
    assert make_env(workflows=[]).driver.get_manifest("preview") is None


def test_04_register_manifest_is_idempotent(make_env: MakeEnv) -> None:
    env = make_env(workflows=[wf.echo])
    m = manifest([])
    assert env.driver.register_manifest("production", m) == m["versionId"]
    assert env.driver.register_manifest("production", m) == m["versionId"]


def test_05_manifests_are_environment_scoped(make_env: MakeEnv) -> None:
    env = make_env(workflows=[wf.echo])
    prod = manifest([trigger_on("a.b", target="ct.echo")])
    preview = manifest([])
    env.driver.register_manifest("production", prod)
    env.driver.register_manifest("preview", preview)
    assert env.driver.get_manifest("production")["versionId"] == prod["versionId"]  # type: ignore[index]
    assert env.driver.get_manifest("preview")["versionId"] == preview["versionId"]  # type: ignore[index]


# trigger -----------------------------------------------------------------------------------


def test_06_a_trivial_body_completes_on_trigger(make_env: MakeEnv) -> None:
    run = make_env(workflows=[wf.echo]).driver.trigger("ct.echo", {"x": 1})
    assert (run.workflow_id, run.status, run.output) == ("ct.echo", "completed", {"x": 1})


def test_07_trigger_respects_the_environment(make_env: MakeEnv) -> None:
    env = make_env(workflows=[wf.echo])
    run = env.driver.trigger("ct.echo", 1, environment="preview")
    assert run.status == "completed"
    assert env.get_run(run.id).environment == "preview"


def test_08_one_idempotency_key_gives_one_run(make_env: MakeEnv) -> None:
    env = make_env(workflows=[wf.echo])
    first = env.driver.trigger("ct.echo", {"n": 1}, idempotency_key="k")
    second = env.driver.trigger("ct.echo", {"n": 2}, idempotency_key="k")
    assert first.id == second.id == "idem-ct.echo-k"
    assert env.get_run(first.id).input == {"n": 1}


@pytest.mark.race
def test_09_concurrent_triggers_with_one_key_run_once(make_env: MakeEnv) -> None:
    recorder = wf.Recorder()
    env = make_env(workflows=[wf.count], services={"rec": recorder})
    barrier = threading.Barrier(8)
    ids: list[str] = []

    def go() -> None:
        barrier.wait()
        ids.append(env.driver.trigger("ct.count", None, idempotency_key="same").id)

    threads = [threading.Thread(target=go) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(ids)) == 1 and len(ids) == 8
    assert recorder.items == ["body"]
    assert env.get_run(ids[0]).status == "completed"


# ingestEvent -------------------------------------------------------------------------------


def envelope(name: str = "order.created", data: Any = None, **metadata: Any) -> dict[str, Any]:
    return {"name": name, "data": data or {"id": "o1"}, "metadata": metadata, "emittedAt": EMITTED}


def test_10_ingest_without_a_manifest_is_refused(make_env: MakeEnv) -> None:
    result = make_env(workflows=[]).driver.ingest_event("production", envelope())
    assert result["ok"] is False and result["reason"] == "manifest_not_registered"


def test_11_a_manifest_without_filters_matches_nothing(make_env: MakeEnv) -> None:
    env = make_env(workflows=[wf.echo])
    env.driver.register_manifest("production", manifest([]))
    result = env.driver.ingest_event("production", envelope(eventId="evt_given"))
    assert result == {"ok": True, "eventId": "evt_given", "matches": []}


def test_12_the_event_id_is_derived_when_absent(make_env: MakeEnv) -> None:
    env = make_env(workflows=[wf.echo])
    env.driver.register_manifest("production", manifest([]))
    assert env.driver.ingest_event("production", envelope())["eventId"].startswith("evt_")


def test_13_the_derived_event_id_is_stable(make_env: MakeEnv) -> None:
    env = make_env(workflows=[wf.echo])
    env.driver.register_manifest(
        "production", manifest([trigger_on("order.created", target="ct.echo")])
    )
    first = env.driver.ingest_event("production", envelope())
    second = env.driver.ingest_event("production", envelope())
    assert first["eventId"] == second["eventId"]
    assert first["matches"][0]["runId"] == second["matches"][0]["runId"]


def test_14_a_where_predicate_matches_and_triggers_a_run(make_env: MakeEnv) -> None:
    env = make_env(workflows=[wf.echo])
    where = {"eq": [{"path": "data.id"}, {"lit": "o1"}]}
    flt = trigger_on("order.created", target="ct.echo", where=where)
    env.driver.register_manifest("production", manifest([flt]))
    result = env.driver.ingest_event("production", envelope())
    [match] = result["matches"]
    assert (match["status"], match["filterId"], match["targetWorkflowId"]) == (
        "queued",
        flt["id"],
        "ct.echo",
    )
    run = env.get_run(match["runId"])
    assert run.status == "completed" and run.environment == "production"


def test_15_a_failing_predicate_does_not_block_another_filter(make_env: MakeEnv) -> None:
    # Stores fail closed: a predicate that cannot evaluate is refused at registration, so a
    # stored manifest never carries one; a predicate that does not hold skips only its filter.
    env = make_env(workflows=[wf.echo])
    bad = raw_filter("ef_0000000000000bad", "order.created", "ct.echo", where={"wat": ["x"]})
    with pytest.raises(ManifestValidationError) as refused:
        env.driver.register_manifest("production", manifest([bad], version="v_bad"))
    assert "ef_0000000000000bad" in str(refused.value)
    never = {"eq": [{"path": "data.id"}, {"lit": "nope"}]}
    filters = [
        trigger_on("order.created", target="ct.echo", where=never),
        trigger_on("order.created", target="ct.echo"),
    ]
    env.driver.register_manifest("production", manifest(filters))
    matches = env.driver.ingest_event("production", envelope())["matches"]
    assert [(m["filterId"], m["status"]) for m in matches] == [(filters[1]["id"], "queued")]


def test_16_the_input_mapper_projects_the_run_input(make_env: MakeEnv) -> None:
    env = make_env(workflows=[wf.echo])
    mapper = {"object": {"order": {"path": "data.id"}, "kind": {"lit": "new"}}}
    flt = trigger_on("order.created", target="ct.echo", input=mapper)
    env.driver.register_manifest("production", manifest([flt]))
    [match] = env.driver.ingest_event("production", envelope())["matches"]
    assert env.get_run(match["runId"]).output == {"order": "o1", "kind": "new"}


def test_17_metadata_event_id_dedupes_runs(make_env: MakeEnv) -> None:
    env = make_env(workflows=[wf.echo])
    env.driver.register_manifest(
        "production", manifest([trigger_on("order.created", target="ct.echo")])
    )
    first = env.driver.ingest_event("production", envelope(eventId="evt_1"))
    second = env.driver.ingest_event("production", envelope(data={"id": "other"}, eventId="evt_1"))
    assert first["matches"][0]["runId"] == second["matches"][0]["runId"]


# admin -------------------------------------------------------------------------------------


def test_18_get_run_returns_a_run_or_none(make_env: MakeEnv) -> None:
    env = make_env(workflows=[wf.echo])
    run = env.driver.trigger("ct.echo", 5)
    found = env.admin.get_run(run.id)
    assert found is not None and (found.id, found.output) == (run.id, 5)
    assert env.admin.get_run("run_missing") is None


def test_19_list_runs_finds_created_runs(make_env: MakeEnv) -> None:
    env = make_env(workflows=[wf.echo])
    ids = {env.driver.trigger("ct.echo", n).id for n in range(2)}
    listed = {r.id for r in env.admin.list_runs(workflow="ct.echo").runs}
    assert ids <= listed


# shutdown ----------------------------------------------------------------------------------


def test_20_operations_after_shutdown_are_refused(make_env: MakeEnv) -> None:
    env = make_env(workflows=[wf.echo])
    run = env.driver.trigger("ct.echo", 1)
    env.driver.shutdown()
    with pytest.raises(DriverShutdownError):
        env.driver.trigger("ct.echo", 2)
    assert env.admin.get_run(run.id) is not None


# ctx.services ------------------------------------------------------------------------------


def test_21_a_body_resolves_a_registered_service(make_env: MakeEnv) -> None:
    env = make_env(workflows=[wf.greet], services={"greeter": lambda name: f"hello {name}"})
    assert env.driver.trigger("ct.greet", {"name": "ann"}).output == "hello ann"


def test_22_services_has_answers_for_registered_and_missing(make_env: MakeEnv) -> None:
    env = make_env(workflows=[wf.has], services={"greeter": object()})
    assert env.driver.trigger("ct.has", None).output == {"greeter": True, "missing": False}


def test_23_resolving_an_unregistered_service_fails_the_run(make_env: MakeEnv) -> None:
    run = make_env(workflows=[wf.missing_service]).driver.trigger("ct.missing_service", None)
    assert run.status == "failed"
