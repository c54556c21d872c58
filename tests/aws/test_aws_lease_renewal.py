"""Lease renewal on the AWS driver (moto): the scenarios of the in-memory tests, with the
second process on a run store client of its own; and what a renewal writes."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from relayflow.adapters.aws.clients import AwsClients
from relayflow.adapters.aws.runstore import DynamoDBRunStore
from relayflow.engine import Engine
from relayflow.testing import WorkflowTestEnv
from tests.aws.moto_driver import SETTINGS, moto_driver
from tests.moto_support import moto_backend, use_fake_credentials
from tests.unit.durability import lease_support as scenario


@pytest.fixture
def on_moto(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    use_fake_credentials(monkeypatch)
    with moto_backend():
        yield


def on_aws(services: dict[str, object]) -> WorkflowTestEnv:
    return moto_driver(workflows=[scenario.three, scenario.then_event], services=services)


def other_aws_process(env: WorkflowTestEnv) -> Engine:
    runs = DynamoDBRunStore.from_settings(
        SETTINGS, client_factory=AwsClients(region="eu-west-1").dynamodb, clock=env.clock
    )
    return scenario.other_process(env, runs)


def test_a_dead_driver_s_run_is_re_driven_within_the_lease_and_a_sweep(on_moto: None) -> None:
    scenario.a_dead_driver_s_run_is_re_driven_by_the_sweeper_within_the_lease(on_aws)


def test_a_step_longer_than_the_lease_is_not_taken_over(on_moto: None) -> None:
    scenario.a_step_longer_than_the_lease_under_a_live_driver_is_not_taken_over(
        on_aws, other_aws_process
    )


def test_a_stale_renewal_fails_and_its_driver_stops(on_moto: None) -> None:
    scenario.a_stale_renewal_fails_and_its_driver_stops(on_aws, other_aws_process)


def test_a_delivery_during_a_long_step_does_not_cost_the_lease(on_moto: None) -> None:
    scenario.a_delivery_during_a_long_step_does_not_cost_the_lease(on_aws, other_aws_process)


def test_a_short_invocation_pays_no_renewal(on_moto: None) -> None:
    scenario.a_short_invocation_pays_no_renewal(on_aws)


def test_a_renewal_is_one_header_write_that_moves_no_index_entry(on_moto: None) -> None:
    client = AwsClients(region="eu-west-1").dynamodb()
    table = SETTINGS.require("table_name")
    headers: list[dict[str, object]] = []

    def look(n: int, worked: int) -> None:
        item = client.get_item(
            TableName=table, Key={"pk": {"S": "run-renewed"}, "sk": {"S": "#run"}}
        )["Item"]
        headers.append({k: item[k] for k in ("version", "gWake", "gWakeAt", "wakeAt") if k in item})

    steps = scenario.LongSteps({1: 45_000}, during=look)
    env = steps.on(on_aws)
    env.trigger("lease.three", run_id="run-renewed")
    versions = [int(str(h["version"]["N"])) for h in headers]  # type: ignore[index]
    # Two renewals in 45 s (at 20 s and 40 s), each a new version of the header only ...
    assert versions[-1] - versions[0] == 2
    # ... and the sweeper's index entry stays where it was (no index write); only the
    # header's exact due time follows the lease.
    index_keys = ("gWake", "gWakeAt")
    assert all(
        {k: h[k] for k in index_keys} == {k: headers[0][k] for k in index_keys} for h in headers
    )
    due = [int(str(h["wakeAt"]["N"])) for h in headers]  # type: ignore[index]
    assert due == sorted(due) and due[-1] > due[0]


def test_a_cancel_during_a_long_step_ends_the_holder_s_renewals(on_moto: None) -> None:
    scenario.a_cancel_during_a_long_step_ends_the_holder_s_renewals(on_aws, other_aws_process)


def test_the_sweeper_passes_over_a_run_in_flight_with_one_header_read(on_moto: None) -> None:
    client = AwsClients(region="eu-west-1").dynamodb()
    calls: list[str] = []

    def count(params: dict[str, Any], model: Any, **_: Any) -> None:
        index = params.get("IndexName")
        calls.append(f"{model.name}{'@' + index if index else ''}")

    client.meta.events.register("provide-client-params.dynamodb.*", count)
    sweeps: list[list[str]] = []

    def sweep(n: int, worked: int) -> None:
        if worked == 30_000:
            calls.clear()
            sweeps.append(scenario.elsewhere(rival.sweep))

    steps = scenario.LongSteps({2: 45_000}, during=sweep)
    env = steps.on(on_aws)
    runs = DynamoDBRunStore.from_settings(SETTINGS, client_factory=lambda: client, clock=env.clock)
    rival = scenario.other_process(env, runs)
    env.trigger("lease.three", run_id="run-in-flight")
    # Its wake entry (kept from before the invocation) is a candidate, but the header's due
    # time is the live lease's end: one batched header read, not a read of the run's
    # partition (its pages and checkpoint log), and nothing to drive.
    assert sweeps == [[]]
    assert sorted(calls) == ["BatchGetItem"] + ["Query@byWakeTime"] * 4
