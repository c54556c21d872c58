"""Lease renewal in memory: a dead driver's run is driven again within a lease plus a sweep,
a live driver keeps a run through a step longer than the lease, a stale renewal stops its
driver, deliveries do not cost the lease, short invocations pay no renewal."""

from __future__ import annotations

import lease_support as scenario

from relayflow.testing import WorkflowTestEnv


def in_memory(services: dict[str, object]) -> WorkflowTestEnv:
    return WorkflowTestEnv(workflows=[scenario.three, scenario.then_event], services=services)


def test_a_dead_driver_s_run_is_re_driven_within_the_lease_and_a_sweep() -> None:
    scenario.a_dead_driver_s_run_is_re_driven_by_the_sweeper_within_the_lease(in_memory)


def test_a_step_longer_than_the_lease_is_not_taken_over() -> None:
    scenario.a_step_longer_than_the_lease_under_a_live_driver_is_not_taken_over(
        in_memory, scenario.other_process
    )


def test_a_stale_renewal_fails_and_its_driver_stops() -> None:
    scenario.a_stale_renewal_fails_and_its_driver_stops(in_memory, scenario.other_process)


def test_a_delivery_during_a_long_step_does_not_cost_the_lease() -> None:
    scenario.a_delivery_during_a_long_step_does_not_cost_the_lease(
        in_memory, scenario.other_process
    )


def test_a_short_invocation_pays_no_renewal() -> None:
    scenario.a_short_invocation_pays_no_renewal(in_memory)


def test_a_cancel_during_a_long_step_ends_the_holder_s_renewals() -> None:
    scenario.a_cancel_during_a_long_step_ends_the_holder_s_renewals(
        in_memory, scenario.other_process
    )
