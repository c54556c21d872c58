"""``POST /api/runs/{id}/checkpoints``: only a genuine, unexpired capability for that run and
slot writes; a repeat of a stored entry succeeds, another entry in its slot is a conflict."""

from __future__ import annotations

from typing import Any

import pytest
from api_harness import Api, make_api

from relayflow.dispatch.capabilities import CAPABILITY_HEADER, CapabilitySigner
from relayflow.errors import SignatureError
from relayflow.protocol import CheckpointEntry, StepJournalEntry
from relayflow.testing import WorkflowTestEnv

SECRET = "route-secret"
RUN = "run-1"
PATH = f"/api/runs/{RUN}/checkpoints"


@pytest.fixture
def signer(env: WorkflowTestEnv) -> CapabilitySigner:
    return CapabilitySigner(SECRET, clock=lambda: env.now() / 1000)


@pytest.fixture
def ckpt_api(env: WorkflowTestEnv, signer: CapabilitySigner) -> Api:
    return make_api(env, checkpoint_capabilities=signer)


def _entry(seq: int, output: str = '"ok"') -> dict[str, Any]:
    step = StepJournalEntry(status="ok", kind="step", attempt=1, output=output)
    return CheckpointEntry(seq=seq, kind="step", key=f"s{seq}", step=step).to_wire()


def _post(api: Api, capability: str | None, body: Any, path: str = PATH) -> Any:
    headers = {CAPABILITY_HEADER: capability} if capability is not None else {}
    return api.post(path, body, token=None, headers=headers)


def _capability(signer: CapabilitySigner, env: WorkflowTestEnv, run: str = RUN) -> str:
    return signer.grant(run, 3, env.now() + 60_000)


def test_a_genuine_capability_writes_into_the_log_the_engine_reads(
    ckpt_api: Api, env: WorkflowTestEnv, signer: CapabilitySigner
) -> None:
    answer = _post(ckpt_api, _capability(signer, env), _entry(3))
    assert (answer.status, answer.body) == (200, {"runId": RUN, "seq": 3})
    [stored] = env.checkpoints.read(RUN, 2)
    assert stored.to_wire() == _entry(3)


def test_a_repeat_of_the_stored_entry_succeeds_and_another_entry_conflicts(
    ckpt_api: Api, env: WorkflowTestEnv, signer: CapabilitySigner
) -> None:
    capability = _capability(signer, env)
    assert _post(ckpt_api, capability, _entry(3)).status == 200
    assert _post(ckpt_api, capability, _entry(3)).status == 200
    conflict = _post(ckpt_api, capability, _entry(3, output='"other"'))
    assert conflict.status == 409
    assert conflict.body["error"] == "checkpoint_slot_taken"
    assert conflict.body["details"] == {"kind": "step", "reason": None, "compensate": False}
    assert len(env.checkpoints.read(RUN, 2)) == 1


def test_a_cancel_in_the_slot_is_named_so_the_host_stops_as_at_a_cancel(
    ckpt_api: Api, env: WorkflowTestEnv, signer: CapabilitySigner
) -> None:
    env.checkpoints.append(
        RUN, CheckpointEntry(seq=3, kind="cancel", reason="stop", compensate=True)
    )
    conflict = _post(ckpt_api, _capability(signer, env), _entry(3))
    assert conflict.status == 409
    assert conflict.body["details"] == {"kind": "cancel", "reason": "stop", "compensate": True}


@pytest.mark.parametrize(
    ("case", "status", "code"),
    [
        ("missing", 401, "unauthorized"),
        ("forged", 401, "unauthorized"),
        ("tampered", 401, "unauthorized"),
        ("expired", 401, "unauthorized"),
        ("wrong_run", 403, "checkpoint_forbidden"),
        ("wrong_slot", 403, "checkpoint_forbidden"),
        ("fence", 403, "checkpoint_forbidden"),
        ("cancel", 403, "checkpoint_forbidden"),
    ],
)
def test_refused_capabilities_and_entries_write_nothing(
    ckpt_api: Api, env: WorkflowTestEnv, signer: CapabilitySigner, case: str, status: int, code: str
) -> None:
    capability: str | None = _capability(signer, env)
    body = _entry(3)
    if case == "missing":
        capability = None
    elif case == "forged":
        capability = CapabilitySigner("another-secret").grant(RUN, 3, env.now() + 60_000)
    elif case == "tampered":
        assert capability is not None
        claims, _, mac = capability.rpartition(".")
        prefix, run, _seq, expiry = claims.split(".")
        capability = f"{prefix}.{run}.1.{expiry}.{mac}"  # an earlier first slot, same MAC
    elif case == "expired":
        env.advance(60_001)
    elif case == "wrong_run":
        capability = _capability(signer, env, run="run-2")
    elif case == "wrong_slot":
        body = _entry(2)
    else:
        body = CheckpointEntry(seq=3, kind=case).to_wire()  # type: ignore[arg-type]
    answer = _post(ckpt_api, capability, body)
    assert (answer.status, answer.body["error"]) == (status, code)
    assert set(answer.body) >= {"error", "message"}
    assert env.checkpoints.read(RUN, 0) == []


def test_a_capability_never_outlives_fifteen_minutes(env: WorkflowTestEnv) -> None:
    signer = CapabilitySigner(SECRET, clock=lambda: env.now() / 1000)
    capability = signer.grant(RUN, 1, env.now() + 3_600_000)
    env.advance(900_001)
    with pytest.raises(SignatureError, match="expired"):
        signer.verify(capability)


def test_a_bad_entry_is_refused_with_400(
    ckpt_api: Api, env: WorkflowTestEnv, signer: CapabilitySigner
) -> None:
    answer = _post(ckpt_api, _capability(signer, env), {"seq": "three", "kind": "step"})
    assert answer.status == 400
    assert set(answer.body) >= {"error", "message"}


def test_without_the_opt_in_every_checkpoint_call_is_refused(
    api: Api, env: WorkflowTestEnv, signer: CapabilitySigner
) -> None:
    answer = _post(api, _capability(signer, env), _entry(3))
    assert (answer.status, answer.body["error"]) == (401, "unauthorized")
    assert env.checkpoints.read(RUN, 0) == []


def _group(seq: int, *kinds: str) -> dict[str, Any]:
    grouped = [
        CheckpointEntry.model_validate(_entry(seq))
        if kind == "step"
        else CheckpointEntry(seq=seq, kind=kind)  # type: ignore[arg-type]
        for kind in kinds
    ]
    return CheckpointEntry(seq=seq, kind="group", entries=grouped).to_wire()


def test_a_group_of_step_entries_is_written_in_one_slot(
    ckpt_api: Api, env: WorkflowTestEnv, signer: CapabilitySigner
) -> None:
    answer = _post(ckpt_api, _capability(signer, env), _group(3, "step", "step"))
    assert (answer.status, answer.body) == (200, {"runId": RUN, "seq": 3})
    [stored] = env.checkpoints.read(RUN, 2)
    assert stored.kind == "group"
    assert [e.key for e in stored.entries or []] == ["s3", "s3"]


@pytest.mark.parametrize("kinds", [("step", "fence"), ("cancel",), ()], ids=str)
def test_a_group_carrying_an_orchestrator_entry_or_nothing_is_refused(
    ckpt_api: Api, env: WorkflowTestEnv, signer: CapabilitySigner, kinds: tuple[str, ...]
) -> None:
    answer = _post(ckpt_api, _capability(signer, env), _group(3, *kinds))
    assert (answer.status, answer.body["error"]) == (403, "checkpoint_forbidden")
    assert env.checkpoints.read(RUN, 0) == []
