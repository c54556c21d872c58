"""Importing ``examples`` registers every example workflow and event filter."""

from __future__ import annotations

import importlib

import pytest

import examples
from relayflow.events import registered_filters
from relayflow.sdk import find_workflow


@pytest.fixture(autouse=True)
def fresh_registration() -> None:
    # Other tests may reset the registries after ``examples`` was first imported.
    for name in examples.__all__:
        importlib.reload(getattr(examples, name))


def test_importing_the_package_registers_every_workflow() -> None:
    for workflow_id in (
        "orders.fulfil",
        "orders.label",
        "expenses.approve",
        "billing.invoice",
        "media.thumbnails",
    ):
        assert find_workflow(workflow_id) is not None, workflow_id


def test_importing_the_package_registers_the_event_filter() -> None:
    filters = {f["id"]: f for f in registered_filters()}
    assert examples.event_triggered.LARGE_EUR_PAYMENTS["id"] in filters
