"""Schedules end to end in ``WorkflowTestEnv``: declarations and manifests, firing from the
virtual clock, idempotency keys, duplicate and late firings, overlap policies, pause/resume,
one-shot schedules and reconcile bookkeeping."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime
from typing import Any

import pytest

from relayflow import Schedule, build_manifest, workflow
from relayflow.errors import ManifestValidationError, ScheduleNotFoundError, ValidationError
from relayflow.events.manifest import manifest_version_id
from relayflow.schedules.times import iso_utc
from relayflow.testing import WorkflowTestEnv

START = datetime(2026, 3, 2, 0, 0, tzinfo=UTC)  # a Monday
START_MS = int(START.timestamp() * 1000)


def quick(input: Any, ctx: Any) -> Any:
    return ctx.step("echo", lambda: input)


def slow(input: Any, ctx: Any) -> Any:
    ctx.sleep("90m")  # longer than the hourly schedule that starts it
    return input


def schedule_runs(env: WorkflowTestEnv, workflow_id: str) -> list[Any]:
    runs = env.list_runs(workflow=workflow_id, limit=100).runs
    return sorted(runs, key=lambda r: r.started_at)


def env_with(wf: Any, **options: Any) -> WorkflowTestEnv:
    return WorkflowTestEnv(workflows=[wf], start_ms=START_MS, **options)


def only_schedule(env: WorkflowTestEnv) -> str:
    (view,) = env.schedules.list(env.environment)
    return view.spec.schedule_id


# ----- declarations and manifests --------------------------------------------------------------


def test_declarations_enter_the_manifest_as_the_reference_writes_them() -> None:
    wf = workflow(
        id="sched.manifest",
        schedule=[
            Schedule.cron("0 9 * * MON-FRI", timezone="Europe/Berlin", input={"n": 1}),
            Schedule.every("15m", overlap="queue", name="poll"),
            Schedule.at(datetime(2026, 5, 9, 13, 22, 8, tzinfo=UTC), environments=["production"]),
            {"cron": "0 0 1 * *", "enabled": False},
        ],
    )(quick)
    manifest = build_manifest(environment="production", workflows=[wf], event_filters=[])
    (entry,) = manifest["workflows"]
    assert entry["schedules"] == [
        {"cron": "0 9 * * MON-FRI", "timezone": "Europe/Berlin", "input": {"n": 1}},
        {"every": "15m", "overlap": "queue", "name": "poll"},
        {"at": "2026-05-09T13:22:08.000Z", "environments": ["production"]},
        {"cron": "0 0 1 * *", "enabled": False},
    ]
    assert manifest["versionId"] == manifest_version_id(manifest)


def test_a_workflow_without_schedules_keeps_the_reference_template() -> None:
    wf = workflow(id="sched.none")(quick)
    manifest = build_manifest(environment="production", workflows=[wf], event_filters=[])
    assert manifest["workflows"][0]["schedules"] == []


@pytest.mark.parametrize(
    ("declaration", "message"),
    [
        ({"cron": "0 9 1 * MON"}, "restricts both"),
        ({"cron": "0 9 * * *", "every": "1h"}, "exactly one of cron, every or at"),
        ({}, "exactly one of"),
        ({"every": "30s"}, "whole number of minutes"),
        ({"every": "1h30m"}, "invalid duration"),
        ({"at": "not a time"}, "ISO 8601"),
        ({"cron": "0 9 * * *", "timezone": "Mars/Olympus"}, "unknown time zone"),
        ({"cron": "0 9 * * *", "overlap": "replace"}, "overlap must be one of"),
        ({"cron": "0 9 * * *", "environments": ["staging"]}, "environments must list"),
        ({"cron": "0 9 * * *", "input": lambda: 1}, "must be a JSON value"),
        ({"cron": "0 9 * * *", "input": {"ids": {1}}}, r"input is not JSON: \$\.ids is a set"),
        (
            {"cron": "0 9 * * *", "input": {"by": {7: "x"}}},
            r"input is not JSON: \$\.by has the key 7",
        ),
        ({"cron": "0 9 * * *", "input": [float("nan")]}, r"input is not JSON: \$\[0\] is nan"),
        ({"cron": "0 9 * * *", "colour": "red"}, "unknown schedule key"),
        ({"cron": "0 9 * * *", "enabled": "yes"}, "enabled must be true or false"),
    ],
)
def test_bad_declarations_are_refused_at_definition(declaration: Any, message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        workflow(id="sched.bad", schedule=declaration)(quick)


def test_a_naive_datetime_needs_a_time_zone() -> None:
    with pytest.raises(ValidationError, match="aware datetime"):
        Schedule.at(datetime(2026, 5, 9, 13, 0))
    berlin = Schedule.at(datetime(2026, 5, 9, 13, 0), timezone="Europe/Berlin")
    assert berlin.declaration["at"] == "2026-05-09T11:00:00.000Z"


def test_registration_refuses_bad_or_duplicate_schedules() -> None:
    env = WorkflowTestEnv(start_ms=START_MS)
    manifest = build_manifest(environment="development", workflows=["w"], event_filters=[])
    manifest["workflows"][0]["schedules"] = [{"cron": "0 9 * * *"}, {"cron": "0 9 * * *"}]
    del manifest["versionId"]
    with pytest.raises(ManifestValidationError, match="the same schedule"):
        env.register_manifest(manifest)
    manifest["workflows"][0]["schedules"] = [{"cron": "0 25 * * *"}]
    with pytest.raises(ManifestValidationError, match=r"schedules\.0"):
        env.register_manifest(manifest)


# ----- firing --------------------------------------------------------------------------------


def test_advance_two_days_runs_a_daily_schedule_twice() -> None:
    wf = workflow(id="sched.daily", schedule=Schedule.cron("0 9 * * *", input={"x": 1}))(quick)
    env = env_with(wf)
    env.advance("2d")
    runs = schedule_runs(env, "sched.daily")
    assert [r.status for r in runs] == ["completed", "completed"]
    sid = only_schedule(env)
    assert [r.id for r in runs] == [
        f"idem-sched.daily-{sid}:2026-03-02T09:00:00Z",
        f"idem-sched.daily-{sid}:2026-03-03T09:00:00Z",
    ]
    detail = env.get_run(runs[0].id)
    assert detail.output == {"x": 1}
    assert detail.triggered_by.kind == "schedule"
    assert detail.triggered_by.model_extra == {
        "scheduleId": sid,
        "scheduledTime": "2026-03-02T09:00:00Z",
    }
    assert detail.started_at == START_MS + 9 * 3_600_000


def test_every_counts_from_the_first_registration() -> None:
    wf = workflow(id="sched.every", schedule=Schedule.every("15m"))(quick)
    env = env_with(wf)
    env.advance("1h")
    starts = [r.started_at - START_MS for r in schedule_runs(env, "sched.every")]
    assert starts == [900_000, 1_800_000, 2_700_000, 3_600_000]


def test_schedules_only_fire_in_their_environments_and_when_enabled() -> None:
    wf = workflow(
        id="sched.envs",
        schedule=[
            Schedule.cron("0 * * * *", environments=["production"]),
            Schedule.cron("30 * * * *", enabled=False),
        ],
    )(quick)
    env = env_with(wf)
    env.advance("3h")
    assert schedule_runs(env, "sched.envs") == []
    assert env.schedules.list("development") == []
    prod = env_with(wf, environment="production")
    prod.advance("3h")
    assert len(schedule_runs(prod, "sched.envs")) == 3


def test_a_duplicate_delivery_starts_nothing() -> None:
    wf = workflow(id="sched.dup", schedule=Schedule.cron("0 9 * * *"))(quick)
    env = env_with(wf)
    env.advance("10h")
    sid = only_schedule(env)
    (first,) = schedule_runs(env, "sched.dup")
    again = env.fire_schedule(sid, "2026-03-02T09:00:00Z")
    assert (again.status, again.run_id) == ("duplicate", first.id)
    assert len(schedule_runs(env, "sched.dup")) == 1


def test_a_late_firing_starts_its_run_and_an_older_one_is_superseded() -> None:
    wf = workflow(id="sched.late", schedule=Schedule.cron("0 9 * * *"))(quick)
    env = env_with(wf)
    sid = only_schedule(env)
    env.clock.set(START_MS + 12 * 3_600_000)  # the 09:00 firing arrives three hours late
    late = env.fire_schedule(sid, "2026-03-02T09:00:00Z")
    assert late.status == "started"
    assert env.get_run(late.run_id or "").started_at == START_MS + 12 * 3_600_000
    env.fire_schedule(sid, "2026-03-03T09:00:00Z")
    older = env.fire_schedule(sid, "2026-03-01T09:00:00Z")
    assert older.status == "superseded"
    assert len(schedule_runs(env, "sched.late")) == 2


def test_overlap_skip_skips_while_the_previous_run_goes_on() -> None:
    wf = workflow(id="sched.skip", schedule=Schedule.cron("0 * * * *"))(slow)
    env = env_with(wf)
    env.advance("4h")  # 01:00 starts (ends 02:30); 02:00 skipped; 03:00 starts; 04:00 skipped
    runs = schedule_runs(env, "sched.skip")
    assert [iso_utc(r.started_at) for r in runs] == ["2026-03-02T01:00:00Z", "2026-03-02T03:00:00Z"]
    (view,) = env.schedules.list("development")
    assert view.state is not None and view.state.last_scheduled_ms == START_MS + 4 * 3_600_000


def test_overlap_queue_starts_the_waiting_firing_when_the_previous_run_ends() -> None:
    wf = workflow(id="sched.queue", schedule=Schedule.cron("0 * * * *", overlap="queue"))(slow)
    env = env_with(wf)
    env.advance("4h")
    runs = schedule_runs(env, "sched.queue")
    sid = only_schedule(env)
    # 01:00 runs until 02:30; the 02:00 firing waits and starts at 02:30; 03:00 finds it
    # running and queues; it starts at 04:00 when the 02:00 run ends. Only one ever waits.
    assert [iso_utc(r.started_at) for r in runs] == [
        "2026-03-02T01:00:00Z",
        "2026-03-02T02:30:00Z",
        "2026-03-02T04:00:00Z",
    ]
    assert runs[1].id == f"idem-sched.queue-{sid}:2026-03-02T02:00:00Z"
    assert runs[2].id == f"idem-sched.queue-{sid}:2026-03-02T03:00:00Z"
    assert runs[0].status == "completed" and runs[1].status == "completed"
    # At most one run at a time, and every run ends.
    env.advance("6h")
    all_runs = schedule_runs(env, "sched.queue")
    spans = [(r.started_at, env.get_run(r.id).completed_at or 1 << 62) for r in all_runs]
    for (_, end), (start, _) in itertools.pairwise(spans):
        assert start >= end


def test_overlap_queue_keeps_one_waiting_firing_and_skips_the_rest() -> None:
    def very_slow(input: Any, ctx: Any) -> Any:
        ctx.sleep("5h")
        return input

    wf = workflow(id="sched.queue1", schedule=Schedule.cron("0 * * * *", overlap="queue"))(
        very_slow
    )
    env = env_with(wf)
    env.advance("4h")
    sid = only_schedule(env)
    assert len(schedule_runs(env, "sched.queue1")) == 1
    state = env.schedules.states.get("development", sid)
    assert state is not None and state.queued_ms == START_MS + 2 * 3_600_000
    env.advance("3h")  # the first run ends at 06:00: the 02:00 firing starts then
    runs = schedule_runs(env, "sched.queue1")
    assert [iso_utc(r.started_at) for r in runs] == ["2026-03-02T01:00:00Z", "2026-03-02T06:00:00Z"]


def test_overlap_allow_starts_every_firing() -> None:
    wf = workflow(id="sched.allow", schedule=Schedule.cron("0 * * * *", overlap="allow"))(slow)
    env = env_with(wf)
    env.advance("4h")
    runs = schedule_runs(env, "sched.allow")
    assert len(runs) == 4
    assert sum(1 for r in runs if r.status == "waiting") == 2  # 03:00 and 04:00 overlap


def test_pause_stops_firings_and_resume_does_not_catch_up() -> None:
    wf = workflow(id="sched.pause", schedule=Schedule.cron("0 * * * *"))(quick)
    env = env_with(wf)
    sid = only_schedule(env)
    env.advance("2h")
    view = env.schedules.pause("development", sid)
    assert view.state is not None and view.state.paused and view.next_fire_times == []
    env.advance("3h")
    assert len(schedule_runs(env, "sched.pause")) == 2
    assert env.fire_schedule(sid, "2026-03-02T06:00:00Z").status == "paused"
    resumed = env.schedules.resume("development", sid)
    assert [iso_utc(t) for t in resumed.next_fire_times[:2]] == [
        "2026-03-02T06:00:00Z",
        "2026-03-02T07:00:00Z",
    ]
    env.advance("2h")
    assert [iso_utc(r.started_at) for r in schedule_runs(env, "sched.pause")][2:] == [
        "2026-03-02T06:00:00Z",
        "2026-03-02T07:00:00Z",
    ]


def test_a_pause_survives_re_registration() -> None:
    wf = workflow(id="sched.repause", schedule=Schedule.cron("0 * * * *", name="hourly"))(quick)
    env = env_with(wf)
    sid = only_schedule(env)
    env.schedules.pause("development", sid)
    changed = workflow(
        id="sched.repause", schedule=Schedule.cron("30 * * * *", name="hourly", input={"v": 2})
    )(quick)
    env.register_manifest(build_manifest(environment="development", workflows=[changed]))
    assert only_schedule(env) == sid  # named: the id survives the timing change
    (hosted,) = env.schedule_host.list("rfs-d-").values()
    assert hosted.enabled is False
    assert hosted.expression == "cron(30 * * * ? *)"
    env.advance("3h")
    assert schedule_runs(env, "sched.repause") == []


def test_trigger_now_ignores_the_pause_and_keeps_the_schedule_progress() -> None:
    wf = workflow(id="sched.now", schedule=Schedule.cron("0 9 * * *"))(quick)
    env = env_with(wf)
    sid = only_schedule(env)
    env.schedules.pause("development", sid)
    fired = env.schedules.trigger_now("development", sid)
    assert fired.status == "started"
    assert env.get_run(fired.run_id or "").status == "completed"
    state = env.schedules.states.get("development", sid)
    assert state is not None and state.last_scheduled_ms is None
    with pytest.raises(ScheduleNotFoundError):
        env.schedules.trigger_now("development", "sch_missing")


def test_a_one_shot_fires_once_and_is_not_re_created() -> None:
    at = Schedule.at(datetime(2026, 3, 2, 6, 0, tzinfo=UTC))
    wf = workflow(id="sched.once", schedule=at)(quick)
    env = env_with(wf)
    env.advance("1d")
    assert [iso_utc(r.started_at) for r in schedule_runs(env, "sched.once")] == [
        "2026-03-02T06:00:00Z"
    ]
    env.register_manifest(build_manifest(environment="development", workflows=[wf]))
    report = env.schedules.reconcile("development")
    assert report.created == [] and env.schedule_host.list("rfs-d-") == {}
    env.advance("1d")
    assert len(schedule_runs(env, "sched.once")) == 1


def test_a_one_shot_in_the_past_never_fires() -> None:
    wf = workflow(id="sched.past", schedule=Schedule.at("2026-03-01T06:00:00Z"))(quick)
    env = env_with(wf)
    env.advance("2d")
    assert schedule_runs(env, "sched.past") == []
    (view,) = env.schedules.list("development")
    assert view.next_fire_times == []


def test_reconcile_creates_changes_and_removes_as_the_manifest_says() -> None:
    env = WorkflowTestEnv(start_ms=START_MS)
    a = workflow(id="sched.r", schedule=[Schedule.cron("0 9 * * *"), Schedule.every("1h")])(quick)
    env.register_manifest(build_manifest(environment="development", workflows=[a]))
    first = env.schedules.reconcile("development")
    assert first.created == [] and len(first.unchanged) == 2  # registration already did it
    b = workflow(id="sched.r", schedule=[Schedule.cron("0 10 * * *")])(quick)
    env.register_manifest(build_manifest(environment="development", workflows=[b]))
    hosted = list(env.schedule_host.list("rfs-d-").values())
    assert [h.expression for h in hosted] == ["cron(0 10 * * ? *)"]
    env.register_manifest(build_manifest(environment="development", workflows=["sched.r"]))
    assert env.schedule_host.list("rfs-d-") == {}


def test_next_fire_times_in_the_listing() -> None:
    wf = workflow(
        id="sched.list", schedule=Schedule.cron("0 9 * * MON-FRI", timezone="Europe/Berlin")
    )(quick)
    env = WorkflowTestEnv(
        workflows=[wf], start_ms=int(datetime(2026, 3, 26, tzinfo=UTC).timestamp() * 1000)
    )
    (view,) = env.schedules.list("development")
    assert view.to_json()["nextFireTimes"] == [
        "2026-03-26T08:00:00Z",
        "2026-03-27T08:00:00Z",
        "2026-03-30T07:00:00Z",
        "2026-03-31T07:00:00Z",
        "2026-04-01T07:00:00Z",
    ]
