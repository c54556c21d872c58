"""An order saga: reserve stock, charge the card (retried), wait out a cooling-off period, wait
for the shipment event, then print the label in a child workflow. If the order cannot be
shipped, the charge is refunded and the stock released (compensations run last-in first-out).

Try it on the local stack (``make dev``)::

    relayflow trigger orders.fulfil --input '{"id": "o-1", "total": 42, "items": ["book"]}'
    relayflow send-event shipment.created --run <run id> \\
        --data '{"orderId": "o-1", "carrier": "UPS", "trackingNumber": "1Z999"}'
"""

from __future__ import annotations

from typing import Any

from relayflow import FatalError, RetryPolicy, WorkflowContext, current_step, workflow

#: The gateway's transient failures are retried with exponential backoff: 0.5 s, 1 s, 2 s.
CHARGE_RETRY = RetryPolicy(max=4, backoff="exponential", initial="500ms", max_delay="5s")


class PaymentGatewayUnavailable(Exception):
    """The payment gateway did not answer; trying again later may succeed."""


def reserve_stock(order: dict[str, Any]) -> dict[str, Any]:
    """Reserve the order's items in the warehouse."""
    items = order.get("items") or []
    if not items:
        raise FatalError(f"order {order['id']} has no items", code="EMPTY_ORDER")
    return {"reservationId": f"res-{order['id']}", "items": list(items)}


def release_stock(reservation: dict[str, Any]) -> dict[str, Any]:
    """Compensation of :func:`reserve_stock`: give the reserved items back."""
    return {"released": reservation["reservationId"]}


def charge_card(order: dict[str, Any]) -> dict[str, Any]:
    """Charge the order total.

    ``order["card"] == "declined"`` is a permanent refusal; ``order["gatewayOutages"]`` makes
    the first N attempts fail the way an unreachable gateway does (retried per
    :data:`CHARGE_RETRY`).
    """
    if order.get("card") == "declined":
        raise FatalError("the card was declined", code="CARD_DECLINED")
    step = current_step()
    attempt = step.attempt if step is not None else 1
    if attempt <= int(order.get("gatewayOutages", 0)):
        raise PaymentGatewayUnavailable(f"payment gateway unavailable (attempt {attempt})")
    return {"chargeId": f"ch-{order['id']}", "amount": order["total"], "attempts": attempt}


def refund_charge(charge: dict[str, Any]) -> dict[str, Any]:
    """Compensation of :func:`charge_card`: refund the full amount."""
    return {"refunded": charge["chargeId"], "amount": charge["amount"]}


def render_label(request: dict[str, Any]) -> dict[str, Any]:
    """Produce the shipping label of a shipment."""
    return {
        "labelId": f"lbl-{request['orderId']}",
        "carrier": request["carrier"],
        "trackingNumber": request["trackingNumber"],
    }


@workflow(id="orders.label", description="Print the shipping label of an order.")
async def print_label(request: dict[str, Any], ctx: WorkflowContext) -> dict[str, Any]:
    """The child workflow: one retried step that renders the label."""
    label: dict[str, Any] = await ctx.step("render-label", render_label, request)
    return label


@workflow(
    id="orders.fulfil",
    retry=RetryPolicy(max=3, backoff="exponential", initial="200ms"),
    description="Reserve, charge, wait for the shipment and print its label.",
)
async def fulfil_order(order: dict[str, Any], ctx: WorkflowContext) -> dict[str, Any]:
    """Fulfil one order.

    Input: ``{"id", "total", "items", "card"?, "gatewayOutages"?, "coolingOff"?,
    "shipmentTimeout"?}``. Output: the charge, the shipment and the label.
    """
    reservation = await ctx.step("reserve-stock", reserve_stock, order, compensate=release_stock)
    charge = await ctx.step(
        "charge-card", charge_card, order, retry=CHARGE_RETRY, compensate=refund_charge
    )
    # Customers may cancel free of charge during the cooling-off period.
    await ctx.sleep(order.get("coolingOff", "2s"))
    shipment = await ctx.wait_for_event(
        "shipment.created",
        match={"orderId": order["id"]},
        timeout=order.get("shipmentTimeout", "2d"),
    )
    if shipment is None:
        # Raising with compensations registered refunds and releases before the run ends.
        raise FatalError(f"order {order['id']} was not shipped in time", code="NOT_SHIPPED")
    label = await ctx.invoke(
        print_label,
        {
            "orderId": order["id"],
            "carrier": shipment["carrier"],
            "trackingNumber": shipment["trackingNumber"],
        },
    )
    return {
        "orderId": order["id"],
        "reservation": reservation["reservationId"],
        "charge": charge,
        "shipment": shipment,
        "label": label,
    }
