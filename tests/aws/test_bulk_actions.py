"""Bulk jobs on the AWS driver on atomic moto: a bulk cancel by tag, a dry run, a job cancelled
midway, and a job whose process dies in the middle of a page (every run is acted on once)."""

from __future__ import annotations

import random
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from relayflow.admin import WorkflowAdmin
from relayflow.engine import Engine
from relayflow.errors import FatalError, HostCrashSignal
from relayflow.operations.bulk import BulkJob, BulkJobs
from relayflow.operations.bulk_host import host_bulk_jobs
from relayflow.operations.bulk_models import BulkJobInput
from relayflow.sdk.registry import workflow
from relayflow.testing import WorkflowTestEnv
from tests.aws.moto_driver import moto_driver

pytestmark = pytest.mark.usefixtures("clean_registry")


def waits_for_go(data: Any, ctx: Any) -> Any:
    return ctx.wait_for_signal("go")


@pytest.fixture
def env(aws: None) -> Iterator[WorkflowTestEnv]:
    yield moto_driver(workflows=[workflow(id="bulk.waits")(waits_for_go)])


def start_waiting(env: WorkflowTestEnv, count: int, tag: str) -> list[str]:
    return [env.trigger("bulk.waits", i, tags=[tag]).id for i in range(count)]


def job_input(**fields: Any) -> BulkJobInput:
    return BulkJobInput.model_validate({"action": "cancel", "filter": {"tag": "doomed"}, **fields})


def actions_of(env: WorkflowTestEnv, run_id: str, job_id: str) -> int:
    """How many actions of the job the run holds."""
    record = env.runs.get(run_id)
    assert record is not None
    return sum(1 for action in record.actions if action.id == job_id)


def finish(env: WorkflowTestEnv, jobs: BulkJobs, job_id: str) -> BulkJob:
    env.run_until_idle()
    return jobs.get(job_id)


def test_a_bulk_cancel_by_tag_cancels_every_match_and_nothing_else(env: WorkflowTestEnv) -> None:
    doomed = start_waiting(env, 200, "doomed")
    spared = start_waiting(env, 20, "spared")
    jobs = BulkJobs(env.admin)
    job, created = jobs.start(job_input(pageSize=50, concurrency=8, by="ops", reason="bad deploy"))
    assert created and job.status == "running"
    done = finish(env, jobs, job.job_id)
    assert (done.status, done.pages) == ("completed", 4)
    assert (done.matched, done.done, done.skipped, done.failed) == (200, 200, 0, 0)
    assert {env.get_run(r).status for r in doomed} == {"cancelled"}
    assert {env.get_run(r).status for r in spared} == {"waiting"}
    assert {actions_of(env, r, job.job_id) for r in doomed} == {1}
    action = next(a for a in env.get_run(doomed[0]).actions if a.id == job.job_id)
    assert (action.kind, action.by, action.reason) == ("cancel", f"bulk:{job.job_id}", "bad deploy")
    assert done.by == "ops"


def test_a_dry_run_counts_without_changing_anything(env: WorkflowTestEnv) -> None:
    doomed = start_waiting(env, 30, "doomed")
    start_waiting(env, 5, "spared")
    before = {r: env.runs.get(r) for r in doomed}
    jobs = BulkJobs(env.admin)
    assert jobs.count(job_input().filter) == 30
    for run_id, record in before.items():
        after = env.runs.get(run_id)
        assert after is not None and record is not None
        assert (after.status, after.version) == (record.status, record.version)
    assert jobs.list() == ([], None)


class ActingAdmin:
    """An admin whose engine's actions go through ``act`` (the engine is otherwise the
    real one): what a test watches or breaks of a job's actions."""

    def __init__(self, admin: WorkflowAdmin, act: Any) -> None:
        self.engine = ActingEngine(admin.engine, act)


class ActingEngine:
    def __init__(self, engine: Engine, act: Any) -> None:
        self._engine = engine
        self._act = act

    def __getattr__(self, name: str) -> Any:
        found = getattr(self._engine, name)
        if name in {"cancel", "redrive"}:
            return lambda run_id, **options: self._act(found, run_id, **options)
        return found


class StopsTheJob:
    """Cancels the bulk job itself after ``after`` actions, as an operator would while a
    page is in flight."""

    def __init__(self, engine: Engine, after: int) -> None:
        self.engine = engine
        self.after = after
        self.job_id: str | None = None
        self._count = 0
        self._lock = threading.Lock()

    def __call__(self, action: Any, run_id: str, **options: Any) -> Any:
        answer = action(run_id, **options)
        with self._lock:
            self._count += 1
            stop = self._count == self.after
        if stop and self.job_id is not None:
            self.engine.cancel(self.job_id, reason="stop", by="ops")
        return answer


def test_a_job_cancelled_midway_stops(env: WorkflowTestEnv) -> None:
    doomed = start_waiting(env, 40, "doomed")
    stopper = StopsTheJob(env.engine, after=3)
    host_bulk_jobs(env.engine, ActingAdmin(env.admin, stopper))  # type: ignore[arg-type]
    jobs = BulkJobs(env.admin)
    job, _ = jobs.start(job_input(pageSize=10, concurrency=2))
    stopper.job_id = job.job_id
    env.run_until_idle()
    assert env.get_run(job.job_id).status == "cancelled"
    statuses = [env.get_run(r).status for r in doomed]
    # The page in flight finishes; no other page starts.
    assert statuses.count("cancelled") == 10
    assert statuses.count("waiting") == 30


def test_a_job_cancelled_between_pages_stops(env: WorkflowTestEnv) -> None:
    doomed = start_waiting(env, 12, "doomed")
    jobs = BulkJobs(env.admin)
    job, _ = jobs.start(job_input(ratePerSecond=4, concurrency=2))
    env.advance(0)  # the first page (4 runs, the rate's second), then a wait
    assert env.get_run(job.job_id).status == "waiting"
    jobs.cancel(job.job_id, by="ops", reason="enough")
    env.run_until_idle()
    stopped = jobs.get(job.job_id)
    assert (stopped.status, stopped.pages, stopped.done) == ("cancelled", 1, 4)
    assert sum(env.get_run(r).status == "cancelled" for r in doomed) == 4


class DiesAfter:
    """A process that dies after ``lives`` actions: every later action dies too."""

    def __init__(self, lives: int) -> None:
        self.lives = lives
        self._lock = threading.Lock()

    def __call__(self, action: Any, run_id: str, **options: Any) -> Any:
        with self._lock:
            self.lives -= 1
            if self.lives < 0:
                raise HostCrashSignal("the bulk job's process died")
        return action(run_id, **options)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_job_that_dies_midway_acts_on_every_run_once(env: WorkflowTestEnv, seed: int) -> None:
    doomed = start_waiting(env, 60, "doomed")
    lives = random.Random(seed).randrange(1, 59)
    host_bulk_jobs(env.engine, ActingAdmin(env.admin, DiesAfter(lives)))  # type: ignore[arg-type]
    jobs = BulkJobs(env.admin)
    job, _ = jobs.start(job_input(pageSize=25, concurrency=4))
    env.advance(0)
    assert env.get_run(job.job_id).status == "running"  # held by the dead process
    assert sum(env.get_run(r).status == "cancelled" for r in doomed) == lives
    host_bulk_jobs(env.engine, env.admin)  # a new process
    env.recover(job.job_id)
    done = finish(env, jobs, job.job_id)
    assert done.status == "completed"
    assert {actions_of(env, r, job.job_id) for r in doomed} == {1}
    assert {env.get_run(r).status for r in doomed} == {"cancelled"}
    assert (done.matched, done.done + done.skipped, done.failed) == (60, 60, 0)
    # The page re-run after the crash skipped what the dead process had done in it.
    # The page re-run after the crash skipped what the dead process had done in it; the
    # pages before it were not re-run.
    assert (done.skipped, done.done) == (lives % 25, 60 - lives % 25)
    assert {reason.code for reason in done.reasons} <= {"already_applied"}


class Outage:
    """A downstream service that is down until it is fixed."""

    def __init__(self) -> None:
        self.fixed = False

    def call(self, item: Any) -> Any:
        if not self.fixed:
            raise FatalError("the supplier API is down", code="SUPPLIER_DOWN")
        return {"imported": item}


def imports(data: Any, ctx: Any) -> Any:
    outage: Outage = ctx.services.resolve("supplier")
    return ctx.step("import", outage.call, data)


@pytest.mark.slow
def test_a_bulk_redrive_of_1000_failed_runs_that_dies_midway_redrives_each_once(
    aws: None,
) -> None:
    outage = Outage()
    env = moto_driver(
        workflows=[workflow(id="bulk.imports")(imports)], services={"supplier": outage}
    )
    failed = [env.trigger("bulk.imports", i).id for i in range(1000)]
    assert {env.get_run(r).status for r in failed} == {"failed"}
    outage.fixed = True
    lives = random.Random(7).randrange(100, 900)
    host_bulk_jobs(env.engine, ActingAdmin(env.admin, DiesAfter(lives)))  # type: ignore[arg-type]
    jobs = BulkJobs(env.admin)
    redrive = {
        "action": "redrive",
        "filter": {"workflowId": "bulk.imports", "statuses": ["failed"]},
    }
    job, _ = jobs.start(BulkJobInput.model_validate({**redrive, "concurrency": 8}))
    env.advance(0)
    assert env.get_run(job.job_id).status == "running"  # held by the dead process
    host_bulk_jobs(env.engine, env.admin)
    env.recover(job.job_id)
    done = finish(env, jobs, job.job_id)
    assert done.status == "completed"
    assert done.failed == 0
    records = [env.runs.get(r) for r in failed]
    assert all(r is not None and r.status == "completed" for r in records)
    assert {len(r.redrives) for r in records if r is not None} == {1}
    assert {actions_of(env, r, job.job_id) for r in failed} == {1}
    # Redriven runs left the failed status: the page re-run after the crash lists only the
    # runs still failed, so the runs the dead process redrove in that page are not counted
    # (their actions are the record of it).
    assert (done.done, done.skipped) == (1000 - lives % 100, 0)
