"""The order saga example: retries, a sleep, a matched event wait, a child run, compensations."""

from __future__ import annotations

from typing import Any

import pytest

from examples.order_saga import fulfil_order, print_label
from relayflow.testing import WorkflowTestEnv

SHIPMENT = {"orderId": "o-1", "carrier": "UPS", "trackingNumber": "1Z999"}


def order(**extra: Any) -> dict[str, Any]:
    return {"id": "o-1", "total": 42, "items": ["book"], "coolingOff": "10s", **extra}


@pytest.fixture
def env() -> WorkflowTestEnv:
    return WorkflowTestEnv(workflows=[fulfil_order, print_label])


def attempts_of(env: WorkflowTestEnv, run_id: str, step_id: str) -> list[str]:
    return [e.outcome for e in env.get_run(run_id).timeline if e.type == "step" and e.id == step_id]


def test_a_shipped_order_completes_with_the_childs_label(env: WorkflowTestEnv) -> None:
    run = env.trigger(fulfil_order, order())
    assert run.status == "waiting"
    assert run.pending_waits == ["sleep:0"]

    env.advance("10s")
    assert env.get_run(run.id).pending_waits == ["event:shipment.created:1"]

    delivery = env.send_event(run.id, "shipment.created", SHIPMENT)
    assert delivery.status == "resolved"
    done = env.get_run(run.id)
    assert done.status == "completed"
    assert done.output["label"] == {
        "labelId": "lbl-o-1",
        "carrier": "UPS",
        "trackingNumber": "1Z999",
    }
    assert done.output["charge"] == {"chargeId": "ch-o-1", "amount": 42, "attempts": 1}
    child = env.get_run(done.children[0])
    assert child.workflow_id == "orders.label"
    assert child.status == "completed"
    assert child.parent_run_id == run.id


def test_the_sleep_wakes_at_its_fixed_time(env: WorkflowTestEnv) -> None:
    run = env.trigger(fulfil_order, order(coolingOff="2m"))
    env.advance("119s")
    assert env.get_run(run.id).pending_waits == ["sleep:0"]
    env.advance("1s")
    assert env.get_run(run.id).pending_waits == ["event:shipment.created:1"]


def test_gateway_outages_are_retried_until_the_charge_succeeds(env: WorkflowTestEnv) -> None:
    run = env.trigger(fulfil_order, order(gatewayOutages=2))
    assert attempts_of(env, run.id, "charge-card") == ["err", "err", "ok"]
    assert env.get_run(run.id).status == "waiting"


def test_a_shipment_for_another_order_does_not_resume_the_run(env: WorkflowTestEnv) -> None:
    run = env.trigger(fulfil_order, order())
    env.advance("10s")
    env.send_event(run.id, "shipment.created", {**SHIPMENT, "orderId": "o-2"})
    assert env.get_run(run.id).status == "waiting"
    env.send_event(run.id, "shipment.created", SHIPMENT)
    assert env.get_run(run.id).status == "completed"


def test_a_shipment_sent_during_the_sleep_is_kept_for_the_wait(env: WorkflowTestEnv) -> None:
    run = env.trigger(fulfil_order, order())
    delivery = env.send_event(run.id, "shipment.created", SHIPMENT)
    assert delivery.status == "buffered"
    env.advance("10s")
    assert env.get_run(run.id).status == "completed"


def compensated_steps(env: WorkflowTestEnv, run_id: str) -> list[tuple[str, str]]:
    return [(c.step_id, c.status) for c in env.get_run(run_id).compensations]


def test_no_shipment_in_time_refunds_and_releases_newest_first(env: WorkflowTestEnv) -> None:
    run = env.trigger(fulfil_order, order(shipmentTimeout="1h"))
    env.advance("10s")
    env.advance("1h")
    ended = env.get_run(run.id)
    assert ended.status == "compensated"
    assert ended.error is not None and ended.error.code == "NOT_SHIPPED"
    assert compensated_steps(env, run.id) == [("charge-card", "ok"), ("reserve-stock", "ok")]


def test_a_declined_card_is_not_retried_and_releases_the_stock(env: WorkflowTestEnv) -> None:
    run = env.trigger(fulfil_order, order(card="declined"))
    ended = env.get_run(run.id)
    assert ended.status == "compensated"
    assert ended.error is not None and ended.error.code == "CARD_DECLINED"
    assert attempts_of(env, run.id, "charge-card") == ["err"]
    assert compensated_steps(env, run.id) == [("reserve-stock", "ok")]


def test_a_gateway_that_stays_down_exhausts_the_retries(env: WorkflowTestEnv) -> None:
    run = env.trigger(fulfil_order, order(gatewayOutages=10))
    env.run_until_idle()
    ended = env.get_run(run.id)
    assert ended.status == "compensated"
    assert attempts_of(env, run.id, "charge-card") == ["err"] * 4


def test_an_empty_order_fails_without_compensation(env: WorkflowTestEnv) -> None:
    run = env.trigger(fulfil_order, order(items=[]))
    ended = env.get_run(run.id)
    assert ended.status == "failed"
    assert ended.error is not None and ended.error.code == "EMPTY_ORDER"
    assert ended.compensations == []


def test_cancelling_with_compensation_undoes_the_charge(env: WorkflowTestEnv) -> None:
    run = env.trigger(fulfil_order, order())
    env.advance("10s")
    cancelled = env.cancel(run.id, reason="customer changed their mind", compensate=True)
    assert cancelled.status == "cancelled"
    assert compensated_steps(env, run.id) == [("charge-card", "ok"), ("reserve-stock", "ok")]
