"""``POST /__voyant/tokens/{tokenId}``: the token url the reference runtime hands workflows.

It completes a token exactly as ``POST /api/tokens/{tokenId}`` does: same body, scope,
answers and refusals, for token ids that name their run.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import requests
from api_harness import READER, Api, make_api

from relayflow.local.http_adapter import LambdaHttpServer
from relayflow.testing import WorkflowTestEnv
from relayflow.token_ids import run_token_id

REFERENCE = "/__voyant/tokens"
OWN = "/api/tokens"


def _waiting_callback(api: Api) -> tuple[str, str]:
    run = api.post("/api/runs", {"workflowId": "api.callback"}).body
    return run["id"], run["metadata"]["token"]


def test_the_reference_token_url_completes_a_token_that_names_its_run(api: Api) -> None:
    run_id, token = _waiting_callback(api)

    answer = api.post(f"{REFERENCE}/{token}", {"payload": {"ok": True}})

    assert answer.status == 200
    assert (answer.body["id"], answer.body["status"]) == (run_id, "completed")
    assert answer.body["output"] == {"decision": {"ok": True}}
    assert answer.body["delivery"]["status"] == "resolved"
    assert api.get(f"/api/runs/{run_id}").body["output"] == {"decision": {"ok": True}}


def _exchange(api: Api, base: str, case: str) -> tuple[int, str | None, Any]:
    """One request of ``case`` at ``base``, on a fresh waiting run; (status, error, output)."""
    run_id, token = _waiting_callback(api)
    if case == "no body":
        answer = api.post(f"{base}/{token}")
    elif case == "twice, same payload":
        api.post(f"{base}/{token}", {"payload": 1})
        answer = api.post(f"{base}/{token}", {"payload": 1})
    elif case == "twice, other payload":
        api.post(f"{base}/{token}", {"payload": 1})
        answer = api.post(f"{base}/{token}", {"payload": 2})
    elif case == "after another outcome":
        api.post(f"/api/runs/{run_id}/cancel", {})
        answer = api.post(f"{base}/{token}", {"payload": 1})
    elif case == "an id the workflow chose":
        api.post("/api/runs", {"workflowId": "api.approval"})
        answer = api.post(f"{base}/approve-1", {"payload": 1})
    elif case == "a run that does not exist":
        answer = api.post(f"{base}/{run_token_id('missing', 'tok_0')}", {"payload": 1})
    elif case == "a reader's token":
        answer = api.post(f"{base}/{token}", {"payload": 1}, token=READER)
    elif case == "no credentials":
        answer = api.post(f"{base}/{token}", {"payload": 1}, token=None)
    elif case == "a body that is not an object":
        answer = api.post(f"{base}/{token}", [1])
    else:
        raise AssertionError(case)
    output = answer.body.get("output") if answer.status == 200 else None
    delivery = answer.body.get("delivery", {}).get("status") if answer.status == 200 else None
    return answer.status, answer.error, (output, delivery)


@pytest.mark.parametrize(
    "case",
    [
        "no body",
        "twice, same payload",
        "twice, other payload",
        "after another outcome",
        "an id the workflow chose",
        "a run that does not exist",
        "a reader's token",
        "no credentials",
        "a body that is not an object",
    ],
)
def test_the_reference_token_url_answers_as_the_run_free_token_route(
    env: WorkflowTestEnv, case: str
) -> None:
    own = _exchange(make_api(env), OWN, case)
    reference = _exchange(make_api(env), REFERENCE, case)

    assert reference == own


def test_the_reference_token_url_is_documented_with_the_token_routes(api: Api) -> None:
    doc = api.get("/api/openapi.json", token=None).body

    operation = doc["paths"]["/__voyant/tokens/{token_id}"]["post"]

    assert operation["operationId"] == "completeTokenAtReferenceUrl"
    assert operation["security"] == [{"bearerAuth": ["runs:write"]}]
    assert operation["tags"] == ["tokens"]
    assert set(operation["responses"]) >= {"200", "400", "401", "403", "404", "409"}


@pytest.fixture
def served(api: Api) -> Iterator[str]:
    server = LambdaHttpServer(api.app.resolve, port=0)
    server.start()
    try:
        yield server.url
    finally:
        server.stop()


def test_the_reference_token_url_is_served_over_http(api: Api, served: str) -> None:
    run_id, token = _waiting_callback(api)
    headers = {"Authorization": "Bearer admin-token"}

    answer = requests.post(
        f"{served}{REFERENCE}/{token}", json={"payload": "yes"}, headers=headers, timeout=10
    )
    unknown = requests.post(
        f"{served}{REFERENCE}/tok_0", json={"payload": "yes"}, headers=headers, timeout=10
    )

    assert answer.status_code == 200
    assert (answer.json()["id"], answer.json()["output"]) == (run_id, {"decision": "yes"})
    assert unknown.status_code == 404
    assert unknown.json()["error"] == "token_not_found"
