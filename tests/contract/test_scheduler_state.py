"""The schedules relayflow itself leaves in EventBridge Scheduler (moto), read back from moto:
created when a run parks, one more (named after its wake time) when its wake time moves, all
deleted when it is cancelled or completes; a wake time already passed is never armed but
handed off to be driven at once. What Scheduler does by itself (firing, deleting after
completion) is all the harness adds."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

import tests.contract.contract_workflows as wf
from relayflow import workflow
from relayflow.adapters.aws.alarms import at_expression, schedule_name
from relayflow.core.settings import CoreSettings
from relayflow.testing import WorkflowTestEnv
from relayflow.testing.alarms import EmulatedScheduler
from tests.aws.moto_driver import moto_driver
from tests.moto_support import moto_backend

MINUTE = 60_000


@workflow(id="ct.two_careful_steps", checkpoint="batched")
def two_careful_steps(data: Any, ctx: Any) -> Any:
    # Batched: each at-most-once step is made durable before it runs by ending the
    # invocation, so every step has an invocation of its own.
    first = ctx.step("one", lambda: 1, semantics="at_most_once")
    second = ctx.step("two", lambda: 2, semantics="at_most_once")
    return first + second


@pytest.fixture
def on_moto() -> Iterator[None]:
    with moto_backend():
        yield


def scheduler_of(env: WorkflowTestEnv) -> EmulatedScheduler:
    assert isinstance(env.alarms, EmulatedScheduler)
    return env.alarms


def left_in_moto(env: WorkflowTestEnv) -> dict[str, tuple[str, int, str]]:
    return scheduler_of(env).schedules()


def test_a_parked_run_has_one_schedule_at_its_wake_time_deleted_once_fired(on_moto: None) -> None:
    env = moto_driver(workflows=[wf.sleepy], services={"rec": wf.Recorder()})
    start = env.now()
    run = env.trigger("ct.sleepy", None)

    wake = start + 10 * MINUTE
    assert left_in_moto(env) == {schedule_name(run.id, wake): (run.id, wake, at_expression(wake))}

    env.advance("10m")
    assert env.get_run(run.id).status == "completed"
    # Scheduler deleted the fired one-time schedule; relayflow created no other.
    assert left_in_moto(env) == {}


def test_a_cancelled_run_leaves_no_schedule(on_moto: None) -> None:
    env = moto_driver(workflows=[wf.sleepy], services={"rec": wf.Recorder()})
    run = env.trigger("ct.sleepy", None)
    assert schedule_name(run.id, env.now() + 10 * MINUTE) in left_in_moto(env)

    env.cancel(run.id, reason="no longer needed")

    assert env.get_run(run.id).status == "cancelled"
    assert left_in_moto(env) == {}


def test_a_run_completed_before_its_timeout_deletes_its_schedule(on_moto: None) -> None:
    env = moto_driver(workflows=[wf.shipment_with_timeout])
    run = env.trigger("ct.shipment_with_timeout", {"id": "o1"})
    timeout = env.now() + 60 * MINUTE
    assert left_in_moto(env) == {
        schedule_name(run.id, timeout): (run.id, timeout, at_expression(timeout))
    }

    env.send_event(run.id, "shipment.created", {"orderId": "o1"})

    assert env.get_run(run.id).status == "completed"
    assert left_in_moto(env) == {}


def test_a_heartbeat_adds_a_schedule_at_the_new_deadline(on_moto: None) -> None:
    env = moto_driver(workflows=[wf.token])
    run = env.trigger("ct.token", {"heartbeat": "5m"})
    token_id = env.get_run(run.id).metadata["token"]
    env.advance("2m")

    env.heartbeat_token(token_id, run_id=run.id)

    deadline = env.now() + 5 * MINUTE
    first = deadline - 2 * MINUTE
    # The schedule of the earlier deadline is left to fire and find nothing due: deleting it
    # could race with a newer arming elsewhere (Scheduler has no conditional writes).
    assert left_in_moto(env) == {
        schedule_name(run.id, first): (run.id, first, at_expression(first)),
        schedule_name(run.id, deadline): (run.id, deadline, at_expression(deadline)),
    }
    env.advance("3m")
    assert schedule_name(run.id, first) not in left_in_moto(env)
    assert env.get_run(run.id).status == "waiting"


def test_a_wake_time_already_passed_is_handed_off_not_armed(on_moto: None) -> None:
    # One invocation per drive: the second step's invocation is handed off at once.
    env = moto_driver(workflows=[two_careful_steps], settings=CoreSettings(inline_invocations=1))
    run = env.trigger("ct.two_careful_steps", None)

    assert env.get_run(run.id).status == "running"
    assert left_in_moto(env) == {}
    assert scheduler_of(env).handoffs() == [(run.id, env.now())]

    env.advance(0)

    done = env.get_run(run.id)
    assert (done.status, done.output) == ("completed", 3)
    assert left_in_moto(env) == {}
    assert scheduler_of(env).handoffs() == []
