"""The Performance page (``docs/performance.md``) and its charts are the bench's last output
(``bench/results.json``), as ``python -m bench --write-docs`` lays them out: a figure typed by
hand, or a chart drawn from other numbers, fails here."""

from __future__ import annotations

import shutil
import sys
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench import docs_charts, docs_page, docs_tables
from bench.results import RESULTS, Results, load, store
from bench.table import Row


def test_the_page_shows_the_stored_results_and_their_charts(tmp_path: Path) -> None:
    page = tmp_path / "performance.md"
    shutil.copy(docs_page.PAGE, page)
    docs_page.lay_out(load(RESULTS), page, tmp_path / "assets")

    assert docs_page.block(page.read_text(encoding="utf-8")) == docs_page.block(
        docs_page.PAGE.read_text(encoding="utf-8")
    ), "docs/performance.md differs from bench/results.json: python -m bench.docs_page"
    for chart in (docs_charts.COST_CHART, docs_charts.WRITE_UNITS_CHART, docs_charts.CPU_CHART):
        drawn = (tmp_path / "assets" / chart.file).read_text(encoding="utf-8")
        assert drawn == (docs_page.ASSETS / chart.file).read_text(encoding="utf-8"), chart.file


def test_the_stored_results_are_a_full_run_of_every_figure() -> None:
    results = load(RESULTS)
    assert "(quick sizes)" not in results.summary
    figures = {row.figure for row in results.rows}
    assert {"1 AWS requests", "2 cost", "3 overhead", "4 ingest", "5 limits"} <= figures
    measurements = {row.measurement for row in results.rows}
    assert "per step, marginal cost of a step, 1,000->10,000 steps" in measurements
    assert results.summary.startswith(f"{len(results.rows)} rows, ")


def test_every_stored_row_reaches_the_page() -> None:
    rows = load(RESULTS).rows
    page = docs_page.block(docs_page.PAGE.read_text(encoding="utf-8"))
    laid_out = docs_tables.sections(rows)
    assert laid_out in page
    for row in rows:
        # a row is either split into columns (its numbers each in a cell) or shown whole
        assert row.measurement in laid_out or any(t.split(row) for t in _tables()), row


def test_a_row_of_another_shape_is_shown_whole_not_dropped() -> None:
    known = Row("1 AWS requests", "per step, sequential, 10 steps", "writes 1.40/step")
    odd = replace(known, measurement="per step, a new kind of run")
    laid_out = docs_tables.sections([known, odd])
    assert "| per step, a new kind of run | writes 1.40/step |" in laid_out
    assert "| per step, sequential, 10 steps | writes 1.40/step |" in laid_out


def test_the_charts_use_the_numbers_the_tables_show() -> None:
    rows = load(RESULTS).rows
    costs = docs_charts.cost_series(rows)
    assert set(costs) == {
        "1,000 steps\nper step",
        "100 steps, 99 sleeps\nper step",
        "1,000 steps\nbatched",
        "100 steps, 99 sleeps\nbatched",
        "map, per item\ngrouped",
        "map, per item\none write per entry",
    }
    for relayflow, step_functions, durable in costs.values():
        laid_out = docs_tables.sections(rows)
        assert f"${relayflow:.2f}" in laid_out and f"${step_functions:.2f}" in laid_out
        assert f"${durable:.2f}" in laid_out
    write_units = docs_charts.write_unit_series(rows)
    assert [steps for steps, _ in write_units["per step"]] == [10, 100, 1_000, 10_000]
    assert [steps for steps, _ in write_units["batched"]] == [10, 100, 1_000, 10_000]
    cpu = docs_charts.cpu_series(rows)
    assert set(cpu) >= {"in-memory, per step", "AWS on moto, per step", "durable SDK runner"}
    assert all(len(points) >= 3 for points in cpu.values())


def test_write_docs_stores_the_rows_and_lays_out_the_page(tmp_path: Path) -> None:
    rows = (
        Row(
            "2 cost",
            "$ per 1M steps, per step, sequential, 1,000 steps, inline host",
            "relayflow 0.50 (DynamoDB writes 0.40); Step Functions 25.00 (50.0x); "
            "durable functions 8.00 (16.0x)",
        ),
    )
    stored = tmp_path / "results.json"
    store(Results(rows, "1 rows, 0 targets passed, 0 failed, 1 s"), stored)
    page = tmp_path / "performance.md"
    page.write_text(f"# Performance\n\n{docs_page.BEGIN}\nold\n{docs_page.END}\n", encoding="utf-8")

    docs_page.lay_out(load(stored), page, tmp_path / "assets")

    text = page.read_text(encoding="utf-8")
    assert "old" not in text
    assert "| per step | 1,000 steps | inline host | $0.50 |" in text
    assert "![" + docs_charts.COST_CHART.alt in text
    assert docs_charts.CPU_CHART.file not in text  # no overhead rows: no CPU chart
    assert (tmp_path / "assets" / docs_charts.COST_CHART.file).read_text().startswith("<?xml")


def _tables() -> list[docs_tables.ColumnTable]:
    return [table for topic in docs_tables.TOPICS for table in topic.tables]


def test_the_flow_control_guide_quotes_the_benchs_slot_writes() -> None:
    """The guide's cost of a limited run in its key's slots is the bench's figure 8."""
    by_name = {row.measurement: row.value for row in load(RESULTS).rows}
    guide = (docs_page.PAGE.parent / "guides" / "flow-control.md").read_text(encoding="utf-8")
    guide = " ".join(guide.split())
    for shape in (", no wait", " that queued"):
        value = by_name[f"writes to the key's slots per limited run{shape}"]  # "2 (2 WCU)"
        writes, units = value.removesuffix(" WCU)").split(" (")
        assert f"{writes} write requests, {units} WCU" in guide, (shape, value)
