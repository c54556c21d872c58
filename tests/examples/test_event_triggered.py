"""The event-triggered example: its filter in the manifest, ``where`` and the input mapper."""

from __future__ import annotations

from typing import Any

import pytest

from examples.event_triggered import LARGE_EUR_PAYMENTS, issue_invoice
from relayflow.events import build_manifest
from relayflow.testing import WorkflowTestEnv

PAID_AT = "2024-05-01T12:00:00.000Z"


@pytest.fixture
def env() -> WorkflowTestEnv:
    env = WorkflowTestEnv(workflows=[issue_invoice])
    manifest = build_manifest(
        environment="development", workflows=[issue_invoice], event_filters=[LARGE_EUR_PAYMENTS]
    )
    env.register_manifest(manifest)
    return env


def payment(amount: float, currency: str = "EUR", event_id: str = "evt-1") -> dict[str, Any]:
    return {
        "name": "payment.received",
        "data": {"id": "p-1", "amount": amount, "currency": currency, "customer": "acme"},
        "metadata": {"eventId": event_id},
        "emittedAt": PAID_AT,
    }


def test_the_filter_targets_the_invoice_workflow() -> None:
    assert LARGE_EUR_PAYMENTS["id"].startswith("ef_")
    assert LARGE_EUR_PAYMENTS["eventType"] == "payment.received"
    assert LARGE_EUR_PAYMENTS["targetWorkflowId"] == "billing.invoice"


def test_a_large_eur_payment_starts_an_invoice_run(env: WorkflowTestEnv) -> None:
    result = env.ingest_event(payment(250))
    assert result["ok"] is True
    [match] = result["matches"]
    assert match["status"] == "queued"
    run = env.get_run(match["runId"])
    assert run.workflow_id == "billing.invoice"
    assert run.status == "completed"
    assert run.input == {"paymentId": "p-1", "amount": 250, "customer": "acme", "paidAt": PAID_AT}
    assert run.output == {
        "number": "INV-p-1",
        "customer": "acme",
        "amount": 250,
        "paidAt": PAID_AT,
    }


@pytest.mark.parametrize(
    ("amount", "currency"),
    [(99.99, "EUR"), (250, "USD")],
)
def test_other_payments_start_nothing(env: WorkflowTestEnv, amount: float, currency: str) -> None:
    result = env.ingest_event(payment(amount, currency))
    assert result["ok"] is True
    assert result["matches"] == []
    assert env.list_runs().runs == []


def test_the_same_event_twice_starts_one_run(env: WorkflowTestEnv) -> None:
    first = env.ingest_event(payment(250, event_id="evt-9"))
    second = env.ingest_event(payment(250, event_id="evt-9"))
    assert first["matches"][0]["runId"] == second["matches"][0]["runId"]
    assert len(env.list_runs().runs) == 1
