"""The per-run usage meter: what is counted for the run being worked on waits for the run's
next save; time counts from the start of the work to each save."""

from __future__ import annotations

import threading

from relayflow.costs import PriceTable, RunUsage, UsageMeter, cost_of
from relayflow.costs.meter import current_run


class Ticks:
    def __init__(self) -> None:
        self.ms = 0.0

    def __call__(self) -> float:
        return self.ms


def test_usage_counted_while_working_on_a_run_is_taken_once() -> None:
    meter = UsageMeter(Ticks())
    with meter.working_on("run_a", invocation=True):
        assert current_run() == "run_a"
        meter.add_current(RunUsage(dynamodb_requests=2, dynamodb_write_units=3))
    meter.add_current(RunUsage(dynamodb_requests=5))  # outside any run: nobody's

    taken = meter.take("run_a")

    assert (taken.dynamodb_requests, taken.dynamodb_write_units) == (2, 3)
    assert taken.drive_invocations == 1
    assert meter.take("run_a").is_empty
    assert current_run() is None


def test_nested_work_is_no_new_invocation_and_another_run_keeps_its_own() -> None:
    meter = UsageMeter(Ticks())
    with meter.working_on("parent", invocation=True):
        with meter.working_on("child", invocation=True):
            meter.add_current(RunUsage(sqs_requests=1))
        meter.add_current(RunUsage(s3_puts=1))

    child, parent = meter.take("child"), meter.take("parent")
    assert (child.sqs_requests, child.drive_invocations, child.s3_puts) == (1, 0, 0)
    assert (parent.s3_puts, parent.drive_invocations, parent.sqs_requests) == (1, 1, 0)


def test_time_is_split_between_the_saves_that_take_it() -> None:
    ticks = Ticks()
    meter = UsageMeter(ticks)
    with meter.working_on("run_a"):
        ticks.ms = 40
        assert meter.take("run_a").orchestrator_ms == 40
        ticks.ms = 100
    ticks.ms = 500  # not working on the run any more: not its time

    assert meter.take("run_a").orchestrator_ms == 60


def test_counting_is_safe_across_threads() -> None:
    meter = UsageMeter(Ticks())

    def count() -> None:
        with meter.working_on("run_a"):
            for _ in range(1000):
                meter.add_current(RunUsage(dynamodb_requests=1))

    threads = [threading.Thread(target=count) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert meter.take("run_a").dynamodb_requests == 4000


def test_cost_prices_each_service_at_the_table() -> None:
    usage = RunUsage(
        dynamodb_write_units=10,
        dynamodb_read_units=4,
        drive_invocations=2,
        worker_invocations=1,
        orchestrator_ms=500,
        scheduler_invocations=1,
        sqs_requests=3,
        s3_puts=2,
        s3_gets=1,
    )
    prices = PriceTable(
        dynamodb_write_unit=1,
        dynamodb_read_unit=0.5,
        lambda_request=10,
        lambda_gb_second=100,
        lambda_memory_gb=2,
        scheduler_invocation=1000,
        sqs_request=7,
        s3_put=3,
        s3_get=1,
    )

    cost = cost_of(usage, prices)

    assert cost.parts == {
        "dynamodb": 12,
        "lambda": 3 * 10 + 2 * 0.5 * 100,
        "scheduler": 1000,
        "sqs": 21,
        "s3": 7,
    }
    assert cost.total == sum(cost.parts.values())


def test_a_dropped_run_holds_nothing_and_the_meter_holds_a_bounded_number_of_runs() -> None:
    meter = UsageMeter(Ticks(), max_runs=2)
    with meter.working_on("ended"):
        meter.add_current(RunUsage(dynamodb_requests=1))
        assert meter.drop("ended").dynamodb_requests == 1
    assert meter.pending("ended").is_empty

    for run_id in ("a", "b", "c"):
        meter.add(run_id, RunUsage(sqs_requests=1))
    assert meter.pending("a").is_empty  # the least recently counted went first
    assert meter.pending("c").sqs_requests == 1
