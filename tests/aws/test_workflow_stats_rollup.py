"""The hourly rollup of finished runs on DynamoDB (atomic moto): exact counts after runs of
mixed outcomes, one write per end whose repeats DynamoDB applies once (its token), and the
figures read back."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from botocore.exceptions import ClientError
from moto_driver import SETTINGS, moto_driver

from relayflow.adapters.aws.clients import AwsClients
from relayflow.adapters.aws.errors import AwsServiceError
from relayflow.adapters.aws.stats import CONFLICT_TRIES, DynamoDBRunStatistics, end_token
from relayflow.errors import FatalError
from relayflow.sdk.registry import workflow
from relayflow.stats import COST_BUCKETS, DURATION_BUCKETS, RollupRecorder, RunEnd
from relayflow.stats.report import workflow_stats
from relayflow.stats.rollup import HOUR_MS
from relayflow.testing import WorkflowTestEnv

MINUTE_MS = 60_000


def _workflows() -> list[Any]:
    @workflow(id="stats.sleeps")
    async def sleeps(data: dict[str, Any], ctx: Any) -> Any:
        await ctx.sleep(f"{data['minutes']}m")
        if data.get("fail"):
            raise FatalError("gave up", code="GAVE_UP")
        return data["minutes"]

    @workflow(id="stats.waits")
    async def waits(data: Any, ctx: Any) -> Any:
        return await ctx.wait_for_signal("go")

    return [sleeps, waits]


@pytest.fixture
def env(aws: None, clean_registry: None) -> WorkflowTestEnv:
    return moto_driver(workflows=_workflows())


def _mixed_runs(env: WorkflowTestEnv) -> tuple[list[str], list[str]]:
    """Six runs that complete after 1 to 6 minutes, three that fail after 10 minutes, two
    cancelled while they wait; returns the ids of the sleeping and the waiting ones."""
    sleeping = [env.trigger("stats.sleeps", {"minutes": m}).id for m in range(1, 7)]
    sleeping += [env.trigger("stats.sleeps", {"minutes": 10, "fail": True}).id for _ in range(3)]
    waiting = [env.trigger("stats.waits").id for _ in range(2)]
    env.run_until_idle()
    env.advance("2m")
    for run_id in waiting:
        env.cancel(run_id)
    return sleeping, waiting


def test_the_rollup_counts_each_finished_run_once_by_status_and_duration(
    env: WorkflowTestEnv,
) -> None:
    start = env.now()
    sleeping, waiting = _mixed_runs(env)
    assert [env.get_run(r).status for r in sleeping] == ["completed"] * 6 + ["failed"] * 3
    assert {env.get_run(r).status for r in waiting} == {"cancelled"}

    rollups = env.statistics.hours("development", "stats.sleeps", start, env.now())
    assert sum(r.runs for r in rollups) == 9
    by_status: dict[str, int] = {}
    for rollup in rollups:
        for status, n in rollup.by_status.items():
            by_status[status] = by_status.get(status, 0) + n
    assert by_status == {"completed": 6, "failed": 3}
    assert sum(r.duration_ms_sum for r in rollups) == (21 + 30) * MINUTE_MS
    cancelled = env.statistics.hours("development", "stats.waits", start, env.now())
    assert [r.by_status for r in cancelled] == [{"cancelled": 2}]
    # Cancelled 2 minutes after the last sleeper ended, 12 minutes after their start.
    assert cancelled[0].duration_ms_sum == 2 * 12 * MINUTE_MS

    stats = workflow_stats(
        env.statistics,
        env.runs,
        environment="development",
        workflow_id="stats.sleeps",
        since=start,
        until=env.now(),
    )
    assert (stats.runs, stats.success_rate) == (9, pytest.approx(6 / 9))
    # Nearest rank over 1, 2, 3, 4, 5, 6, 10, 10, 10 minutes: p50 is 5 min, p95 10 min, each
    # read as the middle of its bucket.
    assert stats.duration_ms.p50 == DURATION_BUCKETS.midpoint(DURATION_BUCKETS.index(5 * MINUTE_MS))
    assert stats.duration_ms.p95 == DURATION_BUCKETS.midpoint(
        DURATION_BUCKETS.index(10 * MINUTE_MS)
    )
    assert stats.duration_ms.mean == pytest.approx(51 * MINUTE_MS / 9)
    assert stats.hours[0].hour == start - start % HOUR_MS
    assert sum(hour.runs for hour in stats.hours) == 9
    elsewhere = env.statistics.hours("production", "stats.sleeps", start, env.now())
    assert elsewhere == []


def test_an_end_is_recorded_by_the_save_that_ended_the_run_only(env: WorkflowTestEnv) -> None:
    start = env.now()
    run_id = env.trigger("stats.sleeps", {"minutes": 1}).id
    env.run_until_idle()
    ended = env.runs.get(run_id)
    assert ended is not None and ended.status == "completed"

    rollups = env.statistics.hours("development", "stats.sleeps", start, env.now())
    assert [(r.by_status, r.duration_ms_sum) for r in rollups] == [({"completed": 1}, MINUTE_MS)]
    # A save after the end (the run already terminal before it) is no new end.
    RollupRecorder(env.statistics).on_saved(ended, ended)
    assert (
        sum(r.runs for r in env.statistics.hours("development", "stats.sleeps", start, env.now()))
        == 1
    )


def test_every_report_of_one_end_carries_the_same_token() -> None:
    end = RunEnd("run_a", "production", "stats.busy", "completed", 1_000, 5, None)
    again = RunEnd("run_a", "production", "stats.busy", "completed", 1_000, 5, None)
    redriven = RunEnd("run_a", "production", "stats.busy", "failed", 9_000, 5, None)
    assert end_token(end) == end_token(again)
    assert end_token(end) != end_token(redriven), "a redriven run's new end counts again"
    assert 1 <= len(end_token(end)) <= 36


def test_cost_sums_and_histogram_add_up_over_runs_with_recorded_usage(env: WorkflowTestEnv) -> None:
    at = env.now()
    costs = [0.0001, 0.0002, 0.0002, 0.004]
    for number, cost in enumerate(costs):
        env.statistics.record_end(
            RunEnd(f"run_{number}", "preview", "stats.sleeps", "completed", at, 1000, cost)
        )
    env.statistics.record_end(RunEnd("run_x", "preview", "stats.sleeps", "failed", at, 5, None))

    (rollup,) = env.statistics.hours("preview", "stats.sleeps", at, at)
    assert (rollup.runs, rollup.costed_runs) == (5, 4)
    assert rollup.cost_usd_sum == pytest.approx(sum(costs))
    assert rollup.costs == {
        COST_BUCKETS.index(0.0001): 1,
        COST_BUCKETS.index(0.0002): 2,
        COST_BUCKETS.index(0.004): 1,
    }
    stats = workflow_stats(
        env.statistics,
        env.runs,
        environment="preview",
        workflow_id="stats.sleeps",
        since=at,
        until=at,
    )
    assert stats.cost_usd.mean == pytest.approx(sum(costs) / 4)
    assert stats.cost_usd.p50 == COST_BUCKETS.midpoint(COST_BUCKETS.index(0.0002))
    assert stats.cost_usd.p95 == COST_BUCKETS.midpoint(COST_BUCKETS.index(0.004))


def test_ends_reported_concurrently_each_count_once(env: WorkflowTestEnv) -> None:
    at = env.now()
    ends = [
        RunEnd(
            f"run_{n}", "production", "stats.busy", "completed" if n % 4 else "failed", at, n, None
        )
        for n in range(40)
    ]
    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(env.statistics.record_end, ends))
    (rollup,) = env.statistics.hours("production", "stats.busy", at, at)
    assert rollup.by_status == {"completed": 30, "failed": 10}
    assert rollup.duration_ms_sum == sum(range(40))


class ConflictingClient:
    """The DynamoDB client, except that transactions are first cancelled as conflicting
    ``conflicts`` times (nothing applied), then one is applied and its answer lost; a
    transaction whose client request token was applied before is not applied again, as
    DynamoDB does within ten minutes (moto does not)."""

    def __init__(self, client: Any, conflicts: int, lose_answer: bool) -> None:
        self._client = client
        self.conflicts = conflicts
        self.lose_answer = lose_answer
        self.calls = 0
        self.applied: set[str] = set()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    def transact_write_items(self, **kwargs: Any) -> Any:
        self.calls += 1
        if self.conflicts:
            self.conflicts -= 1
            raise ClientError(
                {
                    "Error": {"Code": "TransactionCanceledException", "Message": "conflict"},
                    "CancellationReasons": [{"Code": "None"}, {"Code": "TransactionConflict"}],
                },
                "TransactWriteItems",
            )
        token = kwargs["ClientRequestToken"]
        if token in self.applied:
            return {}
        answer = self._client.transact_write_items(**kwargs)
        self.applied.add(token)
        if self.lose_answer:
            self.lose_answer = False
            raise ClientError(
                {"Error": {"Code": "ThrottlingException", "Message": "slow down"}},
                "TransactWriteItems",
            )
        return answer


def test_a_conflicting_transaction_is_tried_again_and_a_lost_answer_counts_once(
    env: WorkflowTestEnv,
) -> None:
    at = env.now()
    client = ConflictingClient(AwsClients(region="eu-west-1").dynamodb(), 2, lose_answer=True)
    store = DynamoDBRunStatistics(SETTINGS.require("table_name"), client_factory=lambda: client)
    end = RunEnd("run_conflicted", "production", "stats.busy", "completed", at, 250, None)

    with pytest.raises(AwsServiceError) as lost:
        store.record_end(end)
    assert lost.value.transient and client.calls == 3, "two conflicts tried again, then applied"
    store.record_end(end)  # the request repeated after its lost answer
    assert client.calls == 4
    (rollup,) = store.hours("production", "stats.busy", at, at)
    assert rollup.by_status == {"completed": 1}

    client.conflicts = CONFLICT_TRIES
    with pytest.raises(AwsServiceError):
        store.record_end(RunEnd("run_starved", "production", "stats.busy", "failed", at, 1, None))
    assert store.hours("production", "stats.busy", at, at)[0].runs == 1
