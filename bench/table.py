"""Rows of the benchmark table (figure, measurement, value, target, verdict) and its rendering."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class Row:
    """One line of the table; ``verdict`` is PASS, FAIL, SKIP or empty (no target)."""

    figure: str
    measurement: str
    value: str
    target: str = ""
    verdict: str = ""


def verdict(ok: bool) -> str:
    """PASS or FAIL."""
    return "PASS" if ok else "FAIL"


@dataclass(frozen=True)
class Timing:
    """Median wall and CPU seconds of repeated runs of one piece of work."""

    wall_s: float
    cpu_s: float
    runs: int


def timed(work: Callable[[], object], runs: int) -> Timing:
    """Run ``work`` ``runs`` times; the medians of wall time and process CPU time.

    CPU time is the whole process's (every thread), so work handed to threads counts.
    """
    walls: list[float] = []
    cpus: list[float] = []
    for _ in range(runs):
        wall, cpu = time.perf_counter(), time.process_time()
        work()
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    return Timing(statistics.median(walls), statistics.median(cpus), runs)


def render(rows: Iterable[Row]) -> str:
    """The rows as a Markdown table (readable in a terminal too)."""
    header = Row("Figure", "Measurement", "Value", "Target", "Result")
    body = list(rows)
    cells = [(r.figure, r.measurement, r.value, r.target, r.verdict) for r in [header, *body]]
    widths = [max(len(c[i]) for c in cells) for i in range(5)]
    lines = []
    for index, cell in enumerate(cells):
        padded = (c.ljust(w) for c, w in zip(cell, widths, strict=True))
        lines.append("| " + " | ".join(padded) + " |")
        if index == 0:
            lines.append("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return "\n".join(lines)
