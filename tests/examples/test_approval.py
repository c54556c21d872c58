"""The approval example: a manager's callback token and the finance team's signal."""

from __future__ import annotations

from typing import Any

import pytest

from examples.approval import approve_expense
from relayflow.testing import WorkflowTestEnv

TOKEN = "manager-approval"


@pytest.fixture
def env() -> WorkflowTestEnv:
    return WorkflowTestEnv(workflows=[approve_expense])


def claim(amount: float, **extra: Any) -> dict[str, Any]:
    return {"id": "c-7", "amount": amount, "employee": "ann", **extra}


def step_ids(env: WorkflowTestEnv, run_id: str) -> list[str]:
    return [e.id for e in env.get_run(run_id).timeline if e.type == "step"]


def test_the_run_waits_on_the_managers_token(env: WorkflowTestEnv) -> None:
    run = env.trigger(approve_expense, claim(120))
    assert run.status == "waiting"
    assert run.pending_waits == [f"token:{TOKEN}"]


def test_a_small_approved_claim_is_paid_without_finance(env: WorkflowTestEnv) -> None:
    run = env.trigger(approve_expense, claim(120))
    delivery = env.complete_token(TOKEN, {"approved": True, "by": "bob"}, run_id=run.id)
    assert delivery.status == "resolved"
    done = env.get_run(run.id)
    assert done.status == "completed"
    assert done.output == {
        "claimId": "c-7",
        "status": "paid",
        "approvedBy": "bob",
        "finance": None,
        "payment": {"paymentId": "pay-c-7", "amount": 120},
    }


def test_a_large_claim_also_waits_for_the_finance_signal(env: WorkflowTestEnv) -> None:
    run = env.trigger(approve_expense, claim(2500))
    env.complete_token(TOKEN, {"approved": True, "by": "bob"}, run_id=run.id)
    waiting = env.get_run(run.id)
    assert waiting.status == "waiting"
    assert waiting.pending_waits == ["signal:finance.approved:0"]
    env.signal(run.id, "finance.approved", {"by": "carol"})
    done = env.get_run(run.id)
    assert done.status == "completed"
    assert done.output["finance"] == {"by": "carol"}
    assert "pay-out" in step_ids(env, run.id)


def test_a_rejected_claim_ends_without_paying(env: WorkflowTestEnv) -> None:
    run = env.trigger(approve_expense, claim(2500))
    env.complete_token(TOKEN, {"approved": False, "by": "bob"}, run_id=run.id)
    done = env.get_run(run.id)
    assert done.status == "completed"
    assert done.output == {"claimId": "c-7", "status": "rejected", "by": "bob"}
    assert "pay-out" not in step_ids(env, run.id)


def test_a_failed_token_fails_the_run(env: WorkflowTestEnv) -> None:
    run = env.trigger(approve_expense, claim(120))
    env.fail_token(TOKEN, {"code": "MANAGER_LEFT", "message": "no manager"}, run_id=run.id)
    failed = env.get_run(run.id)
    assert failed.status == "failed"
    assert failed.error is not None
    assert (failed.error.name, failed.error.code) == ("TokenFailedError", "MANAGER_LEFT")


@pytest.mark.parametrize(
    ("amount", "advance", "code"),
    [
        (120, "7d", "WAIT_TIMEOUT"),  # the manager never answers
        (2500, "3d", "WAIT_TIMEOUT"),  # finance never signals
    ],
)
def test_unanswered_approvals_time_out(
    env: WorkflowTestEnv, amount: float, advance: str, code: str
) -> None:
    run = env.trigger(approve_expense, claim(amount))
    if amount >= 1000:
        env.complete_token(TOKEN, {"approved": True, "by": "bob"}, run_id=run.id)
    env.advance(advance)
    failed = env.get_run(run.id)
    assert failed.status == "failed"
    assert failed.error is not None and failed.error.code == code


def test_an_invalid_claim_fails_at_validation(env: WorkflowTestEnv) -> None:
    run = env.trigger(approve_expense, claim(-5))
    failed = env.get_run(run.id)
    assert failed.status == "failed"
    assert failed.error is not None and failed.error.code == "INVALID_CLAIM"
