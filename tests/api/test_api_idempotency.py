"""Retry-safe writes: ``Idempotency-Key``, ``signalId``/``eventId`` and honest 201s."""

from __future__ import annotations

import threading
from typing import Any

from api_harness import Api

from relayflow.api.metrics import RUNS_TRIGGERED


def keyed(key: str) -> dict[str, str]:
    return {"Idempotency-Key": key}


def test_a_repeated_key_gets_the_first_answer_again(api: Api) -> None:
    body = {"workflowId": "api.echo", "input": 2}
    first = api.post("/api/runs", body, headers=keyed("k-1"))
    again = api.post("/api/runs", body, headers=keyed("k-1"))
    assert first.status == again.status == 201
    assert again.body == first.body
    assert again.headers.get("idempotent-replayed") == "true"
    assert "idempotent-replayed" not in first.headers
    assert len(api.env.list_runs().runs) == 1
    assert api.metrics.counts[RUNS_TRIGGERED] == 1


def test_a_key_used_with_another_body_answers_422(api: Api) -> None:
    api.post("/api/runs", {"workflowId": "api.echo", "input": 2}, headers=keyed("k-2"))
    other = api.post("/api/runs", {"workflowId": "api.echo", "input": 3}, headers=keyed("k-2"))
    assert (other.status, other.error) == (422, "idempotency_key_reused")


def test_a_key_is_scoped_to_its_caller_and_checked(api: Api) -> None:
    bad = api.post("/api/runs", {"workflowId": "api.echo"}, headers=keyed("has space"))
    assert (bad.status, bad.error) == (400, "invalid_idempotency_key")


def test_a_refused_request_gives_its_key_up(api: Api) -> None:
    missing = api.post("/api/runs/nope/signals", {"name": "go"}, headers=keyed("k-3"))
    assert missing.status == 404
    again = api.post("/api/runs/nope/signals", {"name": "go"}, headers=keyed("k-3"))
    assert again.status == 404 and "idempotent-replayed" not in again.headers


def test_a_retried_signal_is_consumed_once(api: Api) -> None:
    run = api.post("/api/runs", {"workflowId": "api.signal"}).body
    body = {"name": "other", "payload": 1, "signalId": "s-1"}
    first = api.post(f"/api/runs/{run['id']}/signals", body)
    again = api.post(f"/api/runs/{run['id']}/signals", body)
    assert first.status == again.status == 200
    assert first.body["delivery"]["status"] == "buffered"
    assert again.body == first.body
    assert again.headers.get("idempotent-replayed") == "true"
    stored = api.env.runs.get(run["id"])
    assert stored is not None and [item.id for item in stored.inbox] == ["s-1"]
    reused = api.post(f"/api/runs/{run['id']}/signals", {**body, "payload": 2})
    assert (reused.status, reused.error) == (422, "idempotency_key_reused")


def test_an_event_id_is_remembered_for_the_runs_whole_life(api: Api) -> None:
    """Beyond the ids kept on the run: the delivery log answers for all of them."""
    env = api.env
    run = env.trigger("api.signal")
    limit = env.engine.settings.seen_ids_limit
    for n in range(limit + 5):
        env.send_event(run.id, "noise", n, event_id=f"e{n}")
    # e0 left the run's inbox window long ago; it is still a duplicate.
    assert env.send_event(run.id, "noise", 0, event_id="e0").status == "duplicate"
    stored = env.runs.get(run.id)
    assert stored is not None
    assert len(stored.inbox) == limit + 5


def test_the_header_key_becomes_the_delivery_id_of_a_signal(api: Api) -> None:
    run = api.post("/api/runs", {"workflowId": "api.signal"}).body
    api.post(f"/api/runs/{run['id']}/signals", {"name": "x"}, headers=keyed("h-1"))
    # A different caller retrying without the header but with the id still deduplicates.
    direct = api.env.driver.send_signal(run["id"], "x", signal_id="h-1")
    assert direct.status == "duplicate"


def test_one_of_many_concurrent_triggers_with_one_body_key_is_told_it_created_the_run(
    api: Api,
) -> None:
    """The created flag is the insert's: exactly one concurrent trigger gets it."""
    answers: list[bool] = []
    lock = threading.Lock()
    start = threading.Barrier(12)

    def trigger() -> None:
        start.wait()
        _, created = api.env.driver.start("api.echo", 1, idempotency_key="same")
        with lock:
            answers.append(created)

    threads = [threading.Thread(target=trigger) for _ in range(12)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(answers) == [False] * 11 + [True]
    # The route answers with that flag: the run exists, so a trigger now answers 200.
    again = api.post("/api/runs", {"workflowId": "api.echo", "input": 1, "idempotencyKey": "same"})
    assert again.status == 200
    assert api.metrics.counts[RUNS_TRIGGERED] == 0


def test_the_openapi_document_declares_the_header(api: Api) -> None:
    doc: Any = api.get("/api/openapi.json").body
    trigger = doc["paths"]["/api/runs"]["post"]
    names = {p["name"].lower() for p in trigger.get("parameters", [])}
    assert "idempotency-key" in names
    assert "422" in trigger["responses"]


def test_body_delivery_ids_are_claimed_with_the_run_s_own_ids_for_its_whole_life() -> None:
    from relayflow.api.idempotency import request_key

    claim = request_key(
        "POST", "/api/runs/run-1/events", {}, {"eventType": "t", "eventId": "e1"}, "caller"
    )
    assert claim is not None
    # The driver's own claim of the id: one record whichever way the delivery comes.
    assert (claim.scope, claim.key, claim.lifelong, claim.delivery) == (
        "run:run-1",
        "EVENT:e1",
        True,
        True,
    )
    header = request_key(
        "POST", "/api/runs/run-1/events", {"idempotency-key": "k1"}, {"eventType": "t"}, "caller"
    )
    assert header is not None and not header.lifelong, "header keys belong to their caller"


def test_a_body_delivery_id_costs_one_claim(api: Api) -> None:
    run = api.post("/api/runs", {"workflowId": "api.signal"}).body
    log = api.env.driver.deliveries.log
    claimed: list[tuple[str, str]] = []
    claim = log.claim

    def counted(scope: str, key: str, *args: Any, **kwargs: Any) -> Any:
        claimed.append((scope, key))
        return claim(scope, key, *args, **kwargs)

    log.claim = counted  # type: ignore[method-assign]
    body = {"name": "other", "payload": 1, "signalId": "s-9"}
    assert api.post(f"/api/runs/{run['id']}/signals", body).status == 200
    assert claimed == [(f"run:{run['id']}", "SIGNAL:s-9")]


def test_a_body_delivery_id_is_one_record_for_the_api_and_the_driver(api: Api) -> None:
    run = api.post("/api/runs", {"workflowId": "api.signal"}).body
    body = {"name": "other", "payload": 1, "signalId": "s-10"}
    assert api.post(f"/api/runs/{run['id']}/signals", body).status == 200
    direct = api.env.driver.send_signal(run["id"], "other", 1, signal_id="s-10")
    assert direct.status == "duplicate"
    # Delivered by the driver first: the driver answers the repeat over HTTP.
    api.env.driver.send_signal(run["id"], "other", 2, signal_id="s-11")
    again = api.post(f"/api/runs/{run['id']}/signals", {**body, "payload": 2, "signalId": "s-11"})
    assert again.status == 200 and again.body["delivery"]["status"] == "duplicate"
    assert "idempotent-replayed" not in again.headers
    reused = api.post(f"/api/runs/{run['id']}/signals", {**body, "signalId": "s-11"})
    assert (reused.status, reused.error) == (422, "idempotency_key_reused")
    stored = api.env.runs.get(run["id"])
    assert stored is not None and [item.id for item in stored.inbox] == ["s-10", "s-11"]
