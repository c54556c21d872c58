"""The benchmarks at their smallest sizes, so that their code keeps working (figures are not
checked here, only that each benchmark runs, measures something and renders its rows)."""

from __future__ import annotations

import gc
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench import (
    bulk_actions,
    fig_cost,
    fig_fanout,
    fig_ingest,
    fig_limits,
    fig_overhead,
    fig_requests,
    write_trace,
)
from bench.aws_meter import IndexSpec, TableSpec, read_units, write_units
from bench.flow_local import Ran
from bench.table import Row, render
from relayflow.adapters.aws.attributes import item_size


@pytest.mark.parametrize(
    ("item", "size"),
    [
        ({"pk": {"S": "abc"}}, 5),
        ({"n": {"N": "12345"}}, 1 + 4),
        ({"b": {"BOOL": True}}, 2),
        ({"l": {"L": [{"S": "ab"}, {"N": "1"}]}}, 1 + 3 + (1 + 2) + (1 + 2)),
        ({"m": {"M": {"k": {"S": "v"}}}}, 1 + 3 + 1 + 1 + 1),
    ],
)
def test_item_sizes_follow_dynamodb_rules(item: dict[str, dict[str, object]], size: int) -> None:
    assert item_size(item) == size


@pytest.mark.parametrize(("size", "units"), [(0, 1), (1024, 1), (1025, 2), (350_000, 342)])
def test_a_write_costs_one_unit_per_started_kilobyte(size: int, units: int) -> None:
    assert write_units(size) == units


def test_a_consistent_read_costs_one_unit_per_started_4_kb() -> None:
    assert (read_units(4096, consistent=True), read_units(4097, consistent=False)) == (1.0, 1.0)


def test_a_sparse_index_has_no_entry_without_its_keys() -> None:
    spec = TableSpec(keys=("pk",), indexes=(IndexSpec("byWake", ("wake",), "KEYS_ONLY"),))
    index = spec.indexes[0]

    assert spec.index_entry(index, {"pk": {"S": "a"}}) is None
    assert spec.index_entry(index, {"pk": {"S": "a"}, "wake": {"N": "1"}, "x": {"S": "y"}}) == {
        "pk": {"S": "a"},
        "wake": {"N": "1"},
    }


def test_the_write_trace_prices_each_item_of_a_sleepy_run() -> None:
    writes, tally = write_trace.trace(3)
    kinds = {write_trace.kind_of(w) for w in writes if w.table.endswith("runs")}
    assert "#run" in kinds
    # Every step is followed by a sleep or the end: the save of the answer is its checkpoint.
    assert "log#" not in kinds
    assert sum(w.table_units for w in writes) == tally.table_write_units
    assert sum(sum(w.index_units.values()) for w in writes) == tally.index_write_units


@pytest.fixture(scope="module")
def requests() -> fig_requests.RequestsResult:
    return fig_requests.measure(sizes=(3, 5, 8), sleepy_steps=3)


def test_the_requests_figure_counts_writes_and_alarms(
    requests: fig_requests.RequestsResult,
) -> None:
    assert [r.status for r in requests.runs] == ["completed"] * 8
    assert all(r.tally.dynamodb_writes > 0 and r.tally.write_units > 0 for r in requests.runs)
    for sleepy in requests.sleepy.values():
        assert sleepy.lambdas.alarm_drives == 2
        assert sleepy.tally.count("scheduler.CreateSchedule") == 2
    # Per step, every step but the last is one more checkpoint write than batched (the last
    # ends the body: the save of the answer is its checkpoint).
    per_step = requests.sequential_of(fig_requests.PER_STEP, 8)
    batched = requests.sequential_of(fig_requests.BATCHED, 8)
    assert per_step is not None and batched is not None
    assert per_step.tally.count("dynamodb.PutItem") >= batched.tally.count("dynamodb.PutItem") + 7
    assert {row.verdict for row in fig_requests.rows(requests)} <= {"PASS", "FAIL", ""}


def test_the_cost_figure_prices_every_workload(requests: fig_requests.RequestsResult) -> None:
    rows = fig_cost.rows(requests)

    assert [r.measurement for r in rows if r.measurement.startswith("$")]
    sleepy = fig_cost.cost_of(requests.sleepy[fig_requests.PER_STEP])
    assert sleepy.step_functions == pytest.approx(25.0 * (3 + 2) / 3)
    assert sleepy.relayflow > 0
    # An HTTP host's checkpoint call adds an API request and an api function invocation to
    # each step; without the route the host is priced as the batched run it behaves as.
    per_step = requests.sequential_of(fig_requests.PER_STEP, 8)
    batched = requests.sequential_of(fig_requests.BATCHED, 8)
    assert per_step is not None and batched is not None
    call = 1.00 + 0.20 + 0.005 * 13.3334
    routed = fig_cost.http_cost_of(per_step, checkpoint_route=True)
    assert routed.relayflow == pytest.approx(fig_cost.cost_of(per_step).relayflow + call)
    assert fig_cost.http_cost_of(batched, checkpoint_route=False).relayflow == pytest.approx(
        fig_cost.cost_of(batched).relayflow
    )
    assert sum(fig_cost.checkpoint_call().values()) * 1e6 == pytest.approx(
        1.00 + 0.20 + 0.015 * 13.3334 + 0.625
    )


def test_the_overhead_figure_times_each_backend() -> None:
    results = fig_overhead.measure(
        runs=1,
        workload_set=(("2 steps", 2, False), ("2 + 1 sleep", 2, True)),
        flat_steps=4,
        flat_short_steps=2,
    )

    assert {o.backend for o in results} >= {
        "in-memory, per step",
        "in-memory, batched",
        "AWS on moto, per step",
        "AWS on moto, batched",
    }
    assert all(o.cpu_ms > 0 and o.wall_ms > 0 for o in results)
    flat = fig_overhead.flatness(results)
    assert flat is not None
    assert "1 run of 4 steps vs 2 runs of 2 steps" in flat.measurement
    pair = [o for o in results if o.backend == fig_overhead.FLAT_BACKEND]
    assert all(o.full_collections is not None for o in pair)
    assert flat.verdict in {"PASS", "FAIL"}
    assert fig_overhead.rows(results)


def test_the_ingest_figure_routes_and_posts_events() -> None:
    result = fig_ingest.measure(events=2, routing_sizes=(10,))

    assert [size for size, _, _ in result.routing] == [10]
    assert all(t.per_second > 0 and t.aws_requests > 0 for t in result.api)
    assert fig_ingest.rows(result)


def test_the_limits_figure_runs_its_workloads_small() -> None:
    # Over the store's per-item value budget, so the output goes through S3.
    result = fig_limits.measure(long_steps=5, big_bytes=400_000, sleeps=2)

    assert result.long_run.status == result.sleepy.status == "completed"
    assert result.big.round_trip and result.big.s3_puts > 0
    assert {row.verdict for row in fig_limits.rows(result)} == {"PASS"}


def test_the_table_renders_every_row() -> None:
    text = render([Row("1", "a", "b", "c", "PASS"), Row("2", "longer", "value")])

    assert text.count("\n") == 3
    assert "| PASS" in text


def test_the_timer_simulation_and_sleep_costs_measure_something() -> None:
    from bench import fig_timers

    plain = fig_timers.simulate_scheduler(3_600_000, handoff=False, runs=5)
    early = fig_timers.simulate_scheduler(3_600_000, handoff=True, runs=5)
    assert all(0 <= late <= 61_000 for late in plain)
    assert all(0 <= late < 1_000 for late in early)  # the queue's delays are whole seconds
    costs = {c.path: c for c in fig_timers.measure_costs()}
    sqs = costs["SQS (10 s sleep)"]
    assert sqs.requests["sqs.SendMessage"] == 1 and "scheduler.CreateSchedule" not in sqs.requests
    handoff = costs["Scheduler + hand-off (1 h sleep)"]
    assert handoff.requests["scheduler.CreateSchedule"] == 1
    assert handoff.requests["sqs.SendMessage"] == 1
    assert handoff.lambda_invocations == 2
    assert all(c.dollars_per_million() > 0 for c in costs.values())


def test_the_time_figure_measures_on_the_local_stack_over_http() -> None:
    from bench import fig_time

    (trigger_s, status), acks = fig_time.measure_local(0.2, 3)
    assert status == "completed" and trigger_s < fig_time.LOCAL_BUDGET_MS / 1000
    assert len(acks.latencies) == 3 and acks.consumed == acks.distinct == 3
    rendered = render([fig_time.acks_row("local stack", acks)])
    assert "local stack" in rendered


def test_the_time_figure_measures_at_small_sizes() -> None:
    from bench import fig_time

    trigger_s, status = fig_time.measure_trigger(0.3, 100)
    acks, consumed, distinct = fig_time.measure_acks(5, 10_000)
    sweep_s, found = fig_time.measure_sweep(20)
    result = fig_time.TimeResult(
        step_s=0.3,
        budget_ms=100,
        trigger_s=trigger_s,
        trigger_status=status,
        acks=acks,
        consumed=consumed,
        distinct=distinct,
        first_delivery=(2, 2),
        later_delivery=(2, 2),
        sweep_s=sweep_s,
        swept_lost=found,
    )
    rendered = render(fig_time.rows(result))
    assert len(acks) == 5 and consumed == distinct == 5 and found
    assert "6 time" in rendered


def test_full_collections_are_counted_while_watched() -> None:
    with fig_overhead.FullCollections() as watched:
        gc.collect()
    gc.collect()
    assert watched.count == 1 and watched.cpu_s >= 0


def test_flow_control_figure_measures_each_store_operation() -> None:
    from bench import fig_flow

    measured = fig_flow.measure()
    assert measured["acquire, slot free"].writes == 1
    assert measured["release, queue empty"].writes == 1
    assert measured["rate limit reserve (repeat)"].writes == 0
    (unqueued, _), (queued, _) = fig_flow.per_run(measured)
    assert (unqueued, queued) == (2, 4)


def test_flow_control_figure_counts_a_whole_runs_extra_writes() -> None:
    """Against the same run unlimited: a run that got its slot writes its acquire and its
    release; one that queued also its queue place (its start rides on its drive's first save)."""
    from bench import fig_flow, flow_runs

    runs = flow_runs.measure()
    assert (runs.no_wait[0], runs.queued[0]) == (2, 4)
    rows = fig_flow.rows(fig_flow.measure(), runs=runs)
    targets = {r.measurement: r.verdict for r in rows if r.target}
    assert sorted(targets.values()) == ["PASS", "PASS"]


def test_flow_control_figure_drains_one_key_on_the_local_stack() -> None:
    from bench import fig_flow, flow_local
    from bench.dev_stack import DevStack

    with DevStack(app=flow_local.APP) as dev:
        drains = {limit: flow_local._drain(dev, limit, 4) for limit in (1, 5)}
    single = drains[1]
    assert single.answered_queued == 4 and len(single.holders) == 1
    waits = single.release_to_start_ms()
    assert len(waits) == 4 and min(waits) >= 0
    assert drains[1].most_at_once == 1 and 1 <= drains[5].most_at_once <= 5
    assert all(drain.runs_per_s > 0 for drain in drains.values())
    rendered = render(fig_flow.local_rows(drains))
    assert "4 releases" in rendered and "limit 5" in rendered


def _ran(name: str, start: int, end: int) -> Ran:
    return Ran(name, start, end)


def test_a_release_measures_from_the_predecessors_end_and_an_overlap_fails() -> None:
    from bench import fig_flow, flow_local

    holder = _ran("h", 0, 100)
    prompt = flow_local.Drain(1, (holder,), (_ran("a", 130, 200), _ran("b", 250, 300)), 2)
    assert prompt.release_to_start_ms() == [30, 50]
    assert prompt.most_at_once == 1
    assert prompt.runs_per_s == pytest.approx(2 / 0.2)
    assert fig_flow.local_rows({1: prompt})[0].verdict == "PASS"

    overlapping = flow_local.Drain(1, (holder,), (_ran("a", 90, 200), _ran("b", 250, 300)), 2)
    assert overlapping.most_at_once == 2
    assert {row.verdict for row in fig_flow.local_rows({1: overlapping})} == {"FAIL"}


@pytest.mark.parametrize("action", ["cancel", "redrive"])
def test_the_bulk_figure_meters_a_small_job(action: str) -> None:
    result = bulk_actions.measure_one(action, 12)
    assert (result.runs, result.done) == (12, 12)
    assert result.requests("dynamodb") >= 12
    assert result.handed_off == (12 if action == "redrive" else 0)
    rendered = render(bulk_actions.rows([result]))
    assert f"bulk {action} of 12 runs" in rendered


def test_the_fanout_figure_groups_a_small_map() -> None:
    runs = fig_fanout.measure(20, repeats=3)
    grouped, single = runs.grouped, runs.single
    assert grouped.items == single.items == 20
    assert len(runs.grouped_write_units) == 3
    assert runs.grouped_write_units == sorted(runs.grouped_write_units)
    assert grouped.write_units_per_item == runs.grouped_write_units[1]
    # One write per entry: the item's step and its completion, each a request.
    assert single.cost.tally.dynamodb_writes >= 2 * 20
    assert grouped.cost.tally.dynamodb_writes < single.cost.tally.dynamodb_writes
    assert grouped.waits_ms and single.waits_ms
    rows = fig_fanout.rows(runs)
    assert {r.verdict for r in rows} <= {"PASS", "FAIL", ""}
    assert any(r.figure == fig_cost.FIGURE for r in rows)
    assert any("median of 3 runs" in r.value for r in rows)
