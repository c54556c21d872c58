"""An event-triggered workflow: every ``payment.received`` event of 100 EUR or more starts an
invoice run. The filter is declared with ``trigger_on`` (a ``where`` predicate and an input
mapper) and travels to the deployment in the environment's manifest.

Try it on the local stack (``make dev``, which registers the manifest)::

    relayflow send-event payment.received \\
        --data '{"id": "p-1", "amount": 250, "currency": "EUR", "customer": "acme"}'
"""

from __future__ import annotations

from typing import Any

from relayflow import WorkflowContext, trigger_on, workflow

#: The smallest payment (in EUR) that gets an invoice.
INVOICE_MINIMUM = 100


def create_invoice(payment: dict[str, Any]) -> dict[str, Any]:
    """Create the invoice of a payment."""
    return {
        "number": f"INV-{payment['paymentId']}",
        "customer": payment["customer"],
        "amount": payment["amount"],
        "paidAt": payment["paidAt"],
    }


def send_invoice(invoice: dict[str, Any]) -> dict[str, Any]:
    """E-mail the invoice to the customer."""
    return {"sent": invoice["number"], "to": invoice["customer"]}


@workflow(id="billing.invoice", description="Invoice a received payment.")
async def issue_invoice(payment: dict[str, Any], ctx: WorkflowContext) -> dict[str, Any]:
    """Create and send the invoice of one payment (the input comes from the event mapper)."""
    invoice: dict[str, Any] = await ctx.step("create-invoice", create_invoice, payment)
    await ctx.step("send-invoice", send_invoice, invoice)
    return invoice


LARGE_EUR_PAYMENTS = trigger_on(
    "payment.received",
    target=issue_invoice,
    where={
        "and": [
            {"gte": [{"path": "data.amount"}, {"lit": INVOICE_MINIMUM}]},
            {"eq": [{"path": "data.currency"}, {"lit": "EUR"}]},
        ]
    },
    input={
        "object": {
            "paymentId": {"path": "data.id"},
            "amount": {"path": "data.amount"},
            "customer": {"path": "data.customer"},
            "paidAt": {"path": "emittedAt"},
        }
    },
)
