"""Run lifecycle over every driver: retries, compensation, cancel, children, crashes,
metadata, timeouts, long runs, listing, streaming."""

from __future__ import annotations

import threading
from collections.abc import Callable

import contract_workflows as wf
import pytest

from relayflow.core.settings import CoreSettings
from relayflow.errors import RunTerminalError
from relayflow.testing import DriverHarness

MakeEnv = Callable[..., DriverHarness]


def test_retries_wait_their_real_delay_and_journal_every_attempt(make_env: MakeEnv) -> None:
    recorder = wf.Recorder()
    recorder.failures_left = 2
    env = make_env(workflows=[wf.flaky], services={"rec": recorder})
    start = env.now()
    run = env.trigger("ct.flaky", None)
    assert env.get_run(run.id).status == "waiting"
    assert env.armed_alarm(run.id) == start + 10_000
    env.advance("10s")
    assert env.get_run(run.id).status == "waiting"
    env.advance("10s")
    done = env.get_run(run.id)
    assert (done.status, done.output) == ("completed", "ok")
    attempts = [e for e in done.timeline if e.type == "step"]
    assert [(a.attempt, a.outcome) for a in attempts] == [(1, "err"), (2, "err"), (3, "ok")]
    assert attempts[0].error is not None and "flaky failure" in attempts[0].error.message
    assert attempts[1].started_at - attempts[0].started_at == 10_000


def test_a_failure_runs_compensations_in_reverse_order(make_env: MakeEnv) -> None:
    recorder = wf.Recorder()
    env = make_env(workflows=[wf.saga], services={"rec": recorder})
    run = env.trigger("ct.saga", {"fail": True})
    assert run.status == "compensated"
    assert recorder.items == ["undo-c", "undo-b", "undo-a"]
    assert [c.step_id for c in run.compensations] == ["c", "b", "a"]


@pytest.mark.parametrize("compensate", [False, True])
def test_cancel_ends_a_waiting_run(make_env: MakeEnv, compensate: bool) -> None:
    recorder = wf.Recorder()
    env = make_env(workflows=[wf.saga], services={"rec": recorder})
    run = env.trigger("ct.saga", {"wait": True})
    cancelled = env.cancel(run.id, reason="user", compensate=compensate)
    assert cancelled.status == "cancelled"
    assert cancelled.error is not None and cancelled.error.message == "user"
    expected = ["undo-c", "undo-b", "undo-a"] if compensate else []
    assert recorder.items == expected
    assert [c.step_id for c in cancelled.compensations] == (["c", "b", "a"] if compensate else [])
    with pytest.raises(RunTerminalError):
        env.signal(run.id, "go")
    with pytest.raises(RunTerminalError):
        env.cancel(run.id)


def test_a_child_end_resumes_its_parent(make_env: MakeEnv) -> None:
    env = make_env(workflows=[wf.parent, wf.child])
    run = env.trigger("ct.parent", {"n": 3})
    child_id = f"{run.id}/invoke:ct.child:0"
    assert env.get_run(run.id).children == [child_id]
    assert env.get_run(child_id).parent_run_id == run.id
    env.advance("1m")
    assert env.get_run(child_id).status == "completed"
    assert env.get_run(run.id).output == {"from_child": {"child": 3}}


def test_a_failed_child_raises_child_run_error_in_its_parent(make_env: MakeEnv) -> None:
    env = make_env(workflows=[wf.parent, wf.child])
    run = env.trigger("ct.parent", {"fail": True})
    env.advance("1m")
    assert env.get_run(run.id).output == {"child_error": "CHILD_RUN_ENDED"}


def test_a_parent_of_a_live_child_is_checked_once_per_period_and_never_invoked(
    make_env: MakeEnv,
) -> None:
    period = CoreSettings().child_reconcile_ms
    env = make_env(workflows=[wf.parent, wf.child])
    run = env.trigger("ct.parent", {"wait": True, "n": 2})
    child_id = f"{run.id}/invoke:ct.child:0"
    start = env.now()
    assert env.armed_alarm(run.id) == start + period
    assert env.armed_alarm(child_id) is None

    env.advance(3 * period)

    assert env.armed_alarm(run.id) == start + 4 * period
    parent, child = env.get_run(run.id), env.get_run(child_id)
    assert (parent.status, parent.invocation_count) == ("waiting", 1)
    assert (child.status, child.invocation_count) == ("waiting", 1)
    env.signal(child_id, "go")
    env.advance("1m")
    assert env.get_run(run.id).output == {"from_child": {"child": 2}}
    assert env.armed_alarm(run.id) is None


def test_cancelling_a_parent_cancels_its_children(make_env: MakeEnv) -> None:
    env = make_env(workflows=[wf.parent, wf.child])
    run = env.trigger("ct.parent", {"wait": True})
    child_id = f"{run.id}/invoke:ct.child:0"
    assert env.get_run(child_id).status == "waiting"
    env.cancel(run.id, reason="stop")
    assert env.get_run(run.id).status == "cancelled"
    assert env.get_run(child_id).status == "cancelled"


def test_a_crashed_host_is_recovered_from_the_last_saved_record(make_env: MakeEnv) -> None:
    recorder = wf.Recorder()
    recorder.crashes_left = 1
    env = make_env(workflows=[wf.crashy], services={"rec": recorder})
    run = env.trigger("ct.crashy", None)
    assert env.get_run(run.id).status == "running"
    recovered = env.recover(run.id)
    assert (recovered.status, recovered.output) == ("completed", "survived")
    assert recorder.items == ["attempt", "attempt"]


def test_metadata_is_applied_once_including_updates_made_inside_steps(make_env: MakeEnv) -> None:
    env = make_env(workflows=[wf.metadata])
    run = env.trigger("ct.metadata", None)
    env.advance("1s")
    done = env.get_run(run.id)
    assert done.status == "completed"
    assert done.metadata == {"stage": "end", "inside": 1, "log": ["after-sleep"]}


def test_the_workflow_timeout_fails_the_run(make_env: MakeEnv) -> None:
    env = make_env(workflows=[wf.slow])
    run = env.trigger("ct.slow", None)
    env.advance("1h")
    failed = env.get_run(run.id)
    assert failed.status == "failed" and failed.error is not None
    assert failed.error.code == "WORKFLOW_TIMEOUT"


def test_a_run_of_1000_steps_completes(make_env: MakeEnv) -> None:
    env = make_env(workflows=[wf.many_steps])
    run = env.trigger("ct.many_steps", {"n": 1000})
    env.run_until_idle()
    done = env.get_run(run.id)
    assert (done.status, done.output) == ("completed", sum(range(1000)))
    assert len([e for e in done.timeline if e.type == "step"]) == 1000


def test_list_runs_filters_and_pages_with_real_cursors(make_env: MakeEnv) -> None:
    env = make_env(workflows=[wf.echo, wf.approval])
    made = [env.trigger("ct.echo", n, tags=["batch"]).id for n in range(5)]
    waiting = env.trigger("ct.approval", None).id
    seen: list[str] = []
    cursor = None
    while True:
        page = env.admin.list_runs(workflow="ct.echo", limit=2, cursor=cursor)
        assert len(page.runs) <= 2
        seen.extend(r.id for r in page.runs)
        cursor = page.next_cursor
        if cursor is None:
            break
    assert sorted(seen) == sorted(made) and len(seen) == 5
    assert [r.id for r in env.admin.list_runs(status="waiting").runs] == [waiting]
    assert {r.id for r in env.admin.list_runs(tag="batch").runs} == set(made)


def test_stream_run_yields_the_journal_events(make_env: MakeEnv) -> None:
    recorder = wf.Recorder()
    env = make_env(workflows=[wf.sleepy], services={"rec": recorder})
    run = env.trigger("ct.sleepy", None)
    env.advance("10m")
    events = list(env.admin.stream_run(run.id))
    kinds = [(e.type, e.id, e.status) for e in events]
    assert ("step", "before", "ok") in kinds and ("wait", "sleep:0", "resolved") in kinds
    assert kinds[-1] == ("status", None, "completed")


def test_stream_run_follows_a_run_until_it_ends(make_env: MakeEnv) -> None:
    env = make_env(workflows=[wf.approval])
    run = env.trigger("ct.approval", None)
    seen: list[tuple[str, str]] = []
    started = threading.Event()

    def follow() -> None:
        for event in env.admin.stream_run(run.id, timeout_s=30):
            seen.append((event.type, event.status))
            started.set()

    reader = threading.Thread(target=follow)
    reader.start()
    assert started.wait(30)
    env.signal(run.id, "approve", "yes")
    reader.join(30)
    assert not reader.is_alive()
    assert ("wait", "resolved") in seen and seen[-1] == ("status", "completed")


def test_an_interrupted_at_most_once_step_is_never_re_run(make_env: MakeEnv) -> None:
    recorder = wf.Recorder()
    recorder.crashes_left = 1
    env = make_env(workflows=[wf.at_most_once], services={"rec": recorder})
    run = env.trigger("ct.at_most_once", None)
    failed = env.recover(run.id)
    assert failed.status == "failed" and failed.error is not None
    assert failed.error.code == "STEP_INTERRUPTED"
    assert recorder.items == ["attempt"]
