"""A captured signed step request runs once: a step host refuses a copy of a request it already
accepted, by the signatures it remembers (per process) and, with a checkpoint log, by the
invocation's claimed slot (across processes)."""

from __future__ import annotations

import io
import json
from collections import Counter
from typing import Any

import pytest

from relayflow.adapters.memory.checkpoints import InMemoryCheckpointLog
from relayflow.dispatch.replay import AcceptedSignatures
from relayflow.dispatch.signing import RequestSigner, SigningMode
from relayflow.protocol import CheckpointEntry, StepRequest
from relayflow.sdk.registry import workflow
from relayflow.worker.hosts import (
    StepHost,
    WsgiApp,
    checkpointing_handler,
    make_lambda_handler,
    make_step_host,
    make_wsgi_app,
)

SECRET = "replay-secret"
NOW_S = 1_700_000_000
CALLS: Counter[str] = Counter()


@workflow(id="aws.replay.charge")
def charge(data: dict[str, Any], ctx: Any) -> int:
    first = ctx.step("reserve", lambda: CALLS.update(["reserve"]) or 1)
    second = ctx.step("charge", lambda: CALLS.update(["charge"]) or 2)
    return int(first) + int(second)


@pytest.fixture(autouse=True)
def _fresh_calls() -> None:
    CALLS.clear()


def request_body(run_id: str = "r-replay", *, channel: bool = False, **fields: Any) -> bytes:
    request = StepRequest(
        run_id=run_id,
        workflow_id="aws.replay.charge",
        invocation_count=1,
        input={},
        checkpoint={"seq": 1} if channel else None,
        **fields,
    )
    return json.dumps(request.to_wire()).encode()


def post(app: WsgiApp, headers: dict[str, str], body: bytes) -> tuple[int, dict[str, Any]]:
    """One POST to a WSGI app, as a WSGI server would make it."""
    environ = {
        "REQUEST_METHOD": "POST",
        "CONTENT_LENGTH": str(len(body)),
        "CONTENT_TYPE": "application/json",
        "wsgi.input": io.BytesIO(body),
        **{f"HTTP_{k.upper().replace('-', '_')}": v for k, v in headers.items()},
    }
    seen: dict[str, int] = {}

    def start_response(status: str, _headers: list[tuple[str, str]]) -> None:
        seen["status"] = int(status.split()[0])

    answer = json.loads(b"".join(app(environ, start_response)))
    return seen["status"], answer


@pytest.mark.parametrize("mode", ["relayflow", "voyant"])
def test_a_signed_request_sent_five_times_to_a_wsgi_host_runs_its_steps_once(
    mode: SigningMode,
) -> None:
    app = make_wsgi_app(secret=SECRET, mode=mode)
    body = request_body()
    headers = RequestSigner(SECRET, mode=mode).headers(body)
    answers = [post(app, headers, body) for _ in range(5)]
    assert (answers[0][0], answers[0][1]["status"], answers[0][1]["output"]) == (
        200,
        "completed",
        3,
    )
    assert [(status, answer["error"]) for status, answer in answers[1:]] == [
        (409, "request_replayed")
    ] * 4
    assert CALLS == {"reserve": 1, "charge": 1}


def test_a_copy_with_the_signature_spelled_otherwise_is_still_a_copy() -> None:
    app = make_wsgi_app(secret=SECRET)
    body = request_body()
    header = RequestSigner(SECRET).headers(body)["x-relayflow-signature"]
    assert post(app, {"x-relayflow-signature": header}, body)[0] == 200
    timestamp, mac = header.split(",")
    respelled = f" {mac} , {timestamp},v1={'0' * 64}"
    status, answer = post(app, {"X-Relayflow-Signature": respelled}, body)
    assert (status, answer["error"]) == (409, "request_replayed")
    assert CALLS == {"reserve": 1, "charge": 1}


def test_a_new_signature_of_the_same_request_is_a_new_request() -> None:
    """A dispatcher that signs again (a later second) sends a new request: accepted."""
    clock = [float(NOW_S)]
    signer = RequestSigner(SECRET, clock=lambda: clock[0])
    app = make_wsgi_app(StepHost(signer=signer))
    body = request_body()
    assert post(app, signer.headers(body), body)[0] == 200
    clock[0] += 1
    assert post(app, signer.headers(body), body)[0] == 200
    assert CALLS == {"reserve": 2, "charge": 2}


def test_a_host_with_a_checkpoint_log_claims_the_slot_so_another_process_refuses_a_copy() -> None:
    log = InMemoryCheckpointLog()
    # Two processes of one host (two Lambda instances, two servers behind a balancer): each
    # has its own record of signatures, both write the run's log.
    first, second = (
        make_wsgi_app(secret=SECRET, handler=checkpointing_handler(log)) for _ in range(2)
    )
    body = request_body(channel=True)
    headers = RequestSigner(SECRET).headers(body)
    status, answer = post(first, headers, body)
    assert (status, answer["status"], answer["checkpointSeq"]) == (200, "completed", 2)
    for _ in range(4):
        status, answer = post(second, headers, body)
        assert (status, answer["error"]) == (409, "request_replayed")
    assert CALLS == {"reserve": 1, "charge": 1}
    # One conditional write per invocation claims it; each step but the last is one more
    # (the last ends the body: the answer carries it).
    assert [entry.kind for entry in log.read("r-replay", 0)] == ["claim", "step"]


def claim_after(entry: CheckpointEntry) -> tuple[int, dict[str, Any]]:
    """The answer of a host whose claim finds ``entry`` in the invocation's first slot."""
    log = InMemoryCheckpointLog()
    log.append("r-replay", entry)
    app = make_wsgi_app(secret=SECRET, handler=checkpointing_handler(log))
    body = request_body(channel=True)
    return post(app, RequestSigner(SECRET).headers(body), body)


def test_a_claim_that_finds_a_fence_runs_nothing_and_answers_fenced() -> None:
    status, answer = claim_after(CheckpointEntry(seq=1, kind="fence", reason="new holder"))
    assert (status, answer["error"]) == (409, "checkpoint_fenced")
    assert CALLS == {}


def test_a_claim_that_finds_a_cancel_answers_cancelled_without_running_a_step() -> None:
    status, answer = claim_after(CheckpointEntry(seq=1, kind="cancel", reason="stop"))
    assert (status, answer["status"], answer["checkpointSeq"]) == (200, "cancelled", 1)
    assert CALLS == {}


def test_the_lambda_host_refuses_a_replayed_envelope() -> None:
    handler = make_lambda_handler(secret=SECRET, mode="voyant")
    body = request_body().decode()
    envelope = {"headers": RequestSigner(SECRET, mode="voyant").headers(body), "body": body}
    answers = [handler(envelope, None) for _ in range(5)]
    assert [answer["statusCode"] for answer in answers] == [200, 409, 409, 409, 409]
    assert json.loads(answers[1]["body"])["error"] == "request_replayed"
    assert CALLS == {"reserve": 1, "charge": 1}


def test_the_record_keeps_a_signature_until_its_window_ends_and_no_longer() -> None:
    clock = [float(NOW_S)]
    signer = RequestSigner(SECRET, clock=lambda: clock[0])
    accepted = AcceptedSignatures()
    app = make_wsgi_app(StepHost(signer=signer, accepted=accepted))
    body = request_body()
    headers = signer.headers(body)
    assert post(app, headers, body)[0] == 200
    clock[0] += 300.999  # the last instant the signature is still within its window
    assert post(app, headers, body)[1]["error"] == "request_replayed"
    clock[0] += 0.001
    status, answer = post(app, headers, body)
    assert (status, answer["error"]) == (401, "unauthorized")
    assert "stale" in answer["message"]
    other = request_body("r-other")
    assert post(app, signer.headers(other), other)[0] == 200
    assert len(accepted) == 1  # the first was forgotten once the signer refused it by itself


def test_the_record_is_bounded_and_refuses_rather_than_forgets() -> None:
    clock = [float(NOW_S)]
    signer = RequestSigner(SECRET, clock=lambda: clock[0])
    app = make_wsgi_app(StepHost(signer=signer, accepted=AcceptedSignatures(capacity=2)))
    bodies = [request_body(f"r-{n}") for n in range(3)]
    assert [post(app, signer.headers(b), b)[0] for b in bodies[:2]] == [200, 200]
    status, answer = post(app, signer.headers(bodies[2]), bodies[2])
    assert (status, answer["error"]) == (503, "replay_record_full")
    clock[0] += 301  # the first two signatures expire
    assert post(app, signer.headers(bodies[2]), bodies[2])[0] == 200


def test_in_voyant_mode_the_signed_deadline_bounds_a_copy() -> None:
    clock = [float(NOW_S)]
    signer = RequestSigner(SECRET, mode="voyant", clock=lambda: clock[0])
    accepted = AcceptedSignatures()
    app = make_wsgi_app(StepHost(signer=signer, accepted=accepted))
    deadline = NOW_S * 1000 + 60_000
    body = request_body(deadline=deadline)
    headers = signer.headers(body)
    assert post(app, headers, body)[0] == 200
    clock[0] = deadline / 1000  # the deadline itself: still accepted, so still remembered
    assert post(app, headers, body)[1]["error"] == "request_replayed"
    clock[0] += 0.001
    status, answer = post(app, headers, body)
    assert (status, answer["error"]) == (401, "unauthorized")
    assert "deadline passed" in answer["message"]
    other = request_body("r-other", deadline=deadline + 60_000)
    assert post(app, signer.headers(other), other)[0] == 200
    assert len(accepted) == 1


def test_signatures_without_a_deadline_make_room_oldest_first() -> None:
    """A reference orchestrator sends no real deadline: nothing bounds those signatures, so a
    full record forgets the oldest of them rather than refuse every request from then on."""
    signer = RequestSigner(SECRET, mode="voyant", clock=lambda: NOW_S)
    app = make_wsgi_app(StepHost(signer=signer, accepted=AcceptedSignatures(capacity=2)))
    bodies = [request_body(f"r-{n}") for n in range(3)]  # deadline: the protocol's "none"
    assert [post(app, signer.headers(b), b)[0] for b in bodies] == [200, 200, 200]
    assert post(app, signer.headers(bodies[2]), bodies[2])[0] == 409
    assert post(app, signer.headers(bodies[0]), bodies[0])[0] == 200  # forgotten first


def test_an_unsigned_host_keeps_no_record() -> None:
    """Without a secret anyone may send anything: there is no signature to remember."""
    host = make_step_host()
    body = request_body()
    assert [host.handle("POST", {}, body)[0] for _ in range(2)] == [200, 200]
