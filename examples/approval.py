"""An expense approval: the manager answers through a callback token, and large claims also
need the finance team's signal before the money is paid out.

Try it on the local stack (``make dev``)::

    relayflow trigger expenses.approve --input '{"id": "c-7", "amount": 2500, "employee": "ann"}'
    relayflow token complete <run id> manager-approval --payload '{"approved": true, "by": "bob"}'
    relayflow signal <run id> finance.approved --payload '{"by": "carol"}'
"""

from __future__ import annotations

from typing import Any

from relayflow import FatalError, WorkflowContext, workflow

#: Claims of at least this amount also need the finance team's approval.
FINANCE_THRESHOLD = 1000


def validate_claim(claim: dict[str, Any]) -> dict[str, Any]:
    """Check the claim is payable."""
    amount = claim.get("amount")
    if not isinstance(amount, int | float) or amount <= 0:
        raise FatalError(f"claim {claim.get('id')} has no positive amount", code="INVALID_CLAIM")
    return {"claimId": claim["id"], "amount": amount, "employee": claim.get("employee")}


def notify_manager(claim: dict[str, Any], token_id: str, callback_url: str) -> dict[str, Any]:
    """Ask the manager to decide; their tool calls back with the token."""
    return {"notified": claim.get("manager", "manager"), "token": token_id, "url": callback_url}


def pay_out(claim: dict[str, Any]) -> dict[str, Any]:
    """Pay the employee."""
    return {"paymentId": f"pay-{claim['id']}", "amount": claim["amount"]}


@workflow(id="expenses.approve", description="Manager approval by token, finance by signal.")
async def approve_expense(claim: dict[str, Any], ctx: WorkflowContext) -> dict[str, Any]:
    """Approve and pay an expense claim.

    Input: ``{"id", "amount", "employee"?, "manager"?}``. The manager completes the token with
    ``{"approved": bool, "by": name}``; claims of :data:`FINANCE_THRESHOLD` or more then wait
    for the ``finance.approved`` signal (three days at most).
    """
    await ctx.step("validate-claim", validate_claim, claim)
    approval = await ctx.wait_for_token(token_id="manager-approval", timeout="7d")
    await ctx.step("notify-manager", notify_manager, claim, approval.token_id, approval.url)
    decision = await approval.wait()
    if not decision or not decision.get("approved"):
        by = decision.get("by") if decision else None
        return {"claimId": claim["id"], "status": "rejected", "by": by}
    finance = None
    if claim["amount"] >= FINANCE_THRESHOLD:
        finance = await ctx.wait_for_signal("finance.approved", timeout="3d", on_timeout="raise")
    payment = await ctx.step("pay-out", pay_out, claim)
    return {
        "claimId": claim["id"],
        "status": "paid",
        "approvedBy": decision.get("by"),
        "finance": finance,
        "payment": payment,
    }
