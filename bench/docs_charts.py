"""The Performance page's charts, drawn from the rows the bench stored (``bench/results.json``).

Each chart reads its numbers through the same column tables the page's tables use
(``bench/docs_tables.py``), so a chart shows exactly the figures printed beside it. A chart
whose rows are missing from the results is not drawn (and the page does not show it).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from bench.docs_tables import COST, FANOUT_COST, OVERHEAD, PER_RUN, ColumnTable
from bench.table import Row


@dataclass(frozen=True)
class Chart:
    """An SVG file under ``docs/assets/`` and the text the page shows for it."""

    file: str
    alt: str


COST_CHART = Chart(
    "bench-cost-per-million-steps.svg",
    "Cost per million steps (a map: per million items) of relayflow, Step Functions and Lambda "
    "durable functions, by workload",
)
WRITE_UNITS_CHART = Chart(
    "bench-write-units-per-step.svg",
    "DynamoDB write units per step against run length, per-step and batched checkpoints",
)
CPU_CHART = Chart(
    "bench-cpu-per-step.svg",
    "CPU time per step against run length, in memory, on moto and on the durable SDK runner",
)


def _matches(table: ColumnTable, rows: Sequence[Row]) -> list[tuple[re.Match[str], re.Match[str]]]:
    found = []
    for row in rows:
        measured = table.measurement.fullmatch(row.measurement)
        value = table.value.fullmatch(row.value)
        if measured is not None and value is not None:
            found.append((measured, value))
    return found


def cost_series(rows: Sequence[Row]) -> dict[str, tuple[float, float, float]]:
    """Per workload run on an inline host: dollars per million steps (per million items of a
    map) for relayflow, Step Functions (Distributed Map for a map) and durable functions."""
    series: dict[str, tuple[float, float, float]] = {}
    for measured, value in _matches(COST, rows):
        if measured["host"] != "inline host":
            continue
        label = f"{measured['run']}\n{measured['mode']}"
        series[label] = (float(value["relayflow"]), float(value["sfn"]), float(value["durable"]))
    for measured, value in _matches(FANOUT_COST, rows):
        label = f"map, per item\n{measured['mode']}"
        series[label] = (float(value["relayflow"]), float(value["sfn"]), float(value["durable"]))
    return series


def _steps(run: str) -> int | None:
    """The length of a sequential run (``"1,000 steps"``); ``None`` for a run with sleeps."""
    found = re.fullmatch(r"([\d,]+) steps", run)
    return None if found is None else int(found[1].replace(",", ""))


def write_unit_series(rows: Sequence[Row]) -> dict[str, list[tuple[int, float]]]:
    """DynamoDB write units per step (table and indexes) by run length, per checkpoint mode."""
    series: dict[str, list[tuple[int, float]]] = {}
    for measured, value in _matches(PER_RUN, rows):
        steps = _steps(measured["run"])
        if steps is not None:
            series.setdefault(measured["mode"], []).append((steps, float(value["wu"])))
    return {mode: sorted(points) for mode, points in series.items()}


def cpu_series(rows: Sequence[Row]) -> dict[str, list[tuple[int, float]]]:
    """CPU milliseconds per step by run length (sequential runs), per driver and mode."""
    series: dict[str, list[tuple[int, float]]] = {}
    for measured, value in _matches(OVERHEAD, rows):
        steps = _steps(measured["run"])
        if steps is None:
            continue
        name = measured["driver"] + (f", {measured['mode']}" if measured["mode"] else "")
        series.setdefault(name, []).append((steps, float(value["cpu"])))
    return {name: sorted(points) for name, points in series.items()}


def _dollars(value: float, _position: float) -> str:
    return f"${value:g}"


def _plain(value: float, _position: float) -> str:
    return f"{value:,g}"


def _two_and_five(value: float, _position: float) -> str:
    """Labels for the minor ticks of a log axis: only 2 and 5 of each decade, or they crowd."""
    leading = round(value / 10 ** math.floor(math.log10(value)))
    return f"{value:,g}" if leading in (2, 5) else ""


def _pyplot() -> ModuleType:
    import matplotlib

    matplotlib.use("svg")
    import matplotlib.pyplot as plt

    # Identical input gives an identical file: fixed ids and no creation date.
    plt.rcParams["svg.hashsalt"] = "relayflow-bench"
    plt.rcParams["svg.fonttype"] = "none"
    return plt


def draw_cost(series: dict[str, tuple[float, float, float]], path: Path) -> None:
    """Grouped bars, one group per workload, on a log scale."""
    plt = _pyplot()
    from matplotlib.ticker import FuncFormatter

    figure, axes = plt.subplots(figsize=(8, 4.2))
    names = ("relayflow", "Step Functions Standard", "Lambda durable functions")
    width = 0.27
    for index, name in enumerate(names):
        xs = [group + (index - 1) * width for group in range(len(series))]
        heights = [values[index] for values in series.values()]
        bars = axes.bar(xs, heights, width, label=name)
        axes.bar_label(bars, labels=[f"${h:.2f}" for h in heights], fontsize=7, padding=2)
    axes.set_xticks(range(len(series)), list(series), fontsize=8)
    axes.set_yscale("log")
    axes.yaxis.set_major_formatter(FuncFormatter(_dollars))
    axes.set_ylim(top=max(max(values) for values in series.values()) * 5)
    axes.set_ylabel("$ per million steps or map items (log scale)")
    axes.set_title("Orchestration cost per million steps or map items (inline step host)")
    axes.legend(fontsize=8, loc="upper center", ncols=3)
    figure.tight_layout()
    figure.savefig(path, format="svg", metadata={"Date": None})
    plt.close(figure)


def draw_lines(
    series: dict[str, list[tuple[int, float]]], path: Path, *, title: str, ylabel: str
) -> None:
    """One line per series against the run's length, both axes on log scales."""
    plt = _pyplot()
    from matplotlib.ticker import FuncFormatter

    figure, axes = plt.subplots(figsize=(8, 4.2))
    for name, points in series.items():
        axes.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=name)
    axes.set_xscale("log")
    axes.set_yscale("log")
    axes.yaxis.set_major_formatter(FuncFormatter(_plain))
    axes.xaxis.set_major_formatter(FuncFormatter(_plain))
    axes.yaxis.set_minor_formatter(FuncFormatter(_two_and_five))
    axes.set_xlabel("steps in the run (sequential)")
    axes.set_ylabel(ylabel)
    axes.set_title(title)
    axes.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, format="svg", metadata={"Date": None})
    plt.close(figure)


#: The line charts: what each shows, the rows it is drawn from, its title and its y axis.
LINE_CHARTS: tuple[
    tuple[Chart, Callable[[Sequence[Row]], dict[str, list[tuple[int, float]]]], str, str], ...
] = (
    (
        WRITE_UNITS_CHART,
        write_unit_series,
        "DynamoDB write units per step against run length (AWS driver on moto)",
        "write units per step (log scale)",
    ),
    (
        CPU_CHART,
        cpu_series,
        "CPU per step against run length (median of repeated runs)",
        "CPU ms per step (log scale)",
    ),
)


def draw(rows: Sequence[Row], assets: Path) -> list[Chart]:
    """Draw every chart the rows support into ``assets``; the charts drawn."""
    assets.mkdir(parents=True, exist_ok=True)
    drawn = []
    costs = cost_series(rows)
    if costs:
        draw_cost(costs, assets / COST_CHART.file)
        drawn.append(COST_CHART)
    for chart, series_of, title, ylabel in LINE_CHARTS:
        series = series_of(rows)
        if series:
            draw_lines(series, assets / chart.file, title=title, ylabel=ylabel)
            drawn.append(chart)
    return drawn
