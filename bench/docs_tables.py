"""The bench's rows laid out for reading: one section per figure, a few narrow tables each.

The bench prints one wide table (figure, measurement, value, target, result). Here the rows
of a figure whose measurement and value have a known shape are split into columns (mode, run,
writes per step, ...); every other row of that figure goes, unchanged, into the figure's
table of remaining rows. Nothing is computed: each cell is text the bench printed, so a row
whose wording changes still reaches the page, in the remaining rows.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from bench.table import Row

#: ``(measurement match, value match) -> cells``; ``None`` when the row has another shape.
Splitter = Callable[[re.Match[str], re.Match[str]], Sequence[str]]


@dataclass(frozen=True)
class ColumnTable:
    """Rows of one shape as columns: both patterns must match the whole text."""

    title: str
    measurement: re.Pattern[str]
    value: re.Pattern[str]
    columns: tuple[str, ...]
    cells: Splitter

    def split(self, row: Row) -> Sequence[str] | None:
        """The row's cells, or ``None`` when it is not of this table's shape."""
        measured = self.measurement.fullmatch(row.measurement)
        value = self.value.fullmatch(row.value)
        if measured is None or value is None:
            return None
        return self.cells(measured, value)


@dataclass(frozen=True)
class Topic:
    """One figure of the bench: its rows' ``figure`` label, a heading and its column tables."""

    figure: str
    heading: str
    tables: tuple[ColumnTable, ...] = ()


RUN = r"(?P<mode>per step|batched), (?:sequential, )?(?P<run>[\d,]+ steps(?:, [\d,]+ sleeps)?)"
PER_RUN = ColumnTable(
    title="DynamoDB, Scheduler and Lambda per run, by checkpoint mode and run length",
    measurement=re.compile(RUN),
    value=re.compile(
        r"writes (?P<writes>[\d.]+)/step, reads (?P<reads>[\d.]+)/step, "
        r"WU (?P<wu>[\d.]+)/step \(table (?P<table>[\d.]+) \+ index (?P<index>[\d.]+)\), "
        r"RU (?P<ru>[\d.]+)/step, Scheduler (?P<scheduler>\d+) calls, "
        r"Lambda (?P<lambda>\d+) invocations/run \((?P<separate>\d+) with a separate step host\), "
        r"CPU (?P<cpu>[\d.]+) ms/step"
    ),
    columns=(
        "Mode",
        "Run",
        "Writes / step",
        "Reads / step",
        "WU / step (table + index)",
        "RU / step",
        "Scheduler calls",
        "Lambda invocations (separate host)",
        "CPU ms / step (moto)",
    ),
    cells=lambda m, v: (
        m["mode"],
        m["run"],
        v["writes"],
        v["reads"],
        f"{v['wu']} ({v['table']} + {v['index']})",
        v["ru"],
        v["scheduler"],
        f"{v['lambda']} ({v['separate']})",
        v["cpu"],
    ),
)

COST = ColumnTable(
    title="Dollars per million steps, orchestration only, at AWS list prices",
    measurement=re.compile(rf"\$ per 1M steps, {RUN}, (?P<host>.+)"),
    value=re.compile(
        r"relayflow (?P<relayflow>[\d.]+) \((?P<parts>[^)]*)\); "
        r"Step Functions (?P<sfn>[\d.]+) \((?P<sfn_x>[\d.]+x)\); "
        r"durable functions (?P<durable>[\d.]+) \((?P<durable_x>[\d.]+x)\)"
    ),
    columns=(
        "Mode",
        "Run",
        "Step host",
        "relayflow",
        "of which",
        "Step Functions (relayflow cheaper by)",
        "Lambda durable functions (relayflow cheaper by)",
    ),
    cells=lambda m, v: (
        m["mode"],
        m["run"],
        m["host"],
        f"${v['relayflow']}",
        v["parts"],
        f"${v['sfn']} ({v['sfn_x']})",
        f"${v['durable']} ({v['durable_x']})",
    ),
)

FANOUT_COST = ColumnTable(
    title="Dollars per million map items, orchestration only, at AWS list prices",
    measurement=re.compile(
        r"\$ per 1M map items, (?P<run>ctx\.map over [\d,]+ items, max_concurrency \d+), "
        r"(?P<mode>.+)"
    ),
    value=re.compile(
        r"relayflow (?P<relayflow>[\d.]+) \((?P<parts>[^)]*)\); "
        r"Step Functions Distributed Map (?P<sfn>[\d.]+) \((?P<sfn_x>[\d.]+x)\); "
        r"durable functions (?P<durable>[\d.]+) \((?P<durable_x>[\d.]+x)\)"
    ),
    columns=(
        "Run",
        "Checkpoints",
        "relayflow",
        "of which",
        "Step Functions Distributed Map (relayflow cheaper by)",
        "Lambda durable functions (relayflow cheaper by)",
    ),
    cells=lambda m, v: (
        m["run"],
        m["mode"],
        f"${v['relayflow']}",
        v["parts"],
        f"${v['sfn']} ({v['sfn_x']})",
        f"${v['durable']} ({v['durable_x']})",
    ),
)

OVERHEAD = ColumnTable(
    title="Time per step by driver, checkpoint mode and run length",
    measurement=re.compile(
        r"(?P<driver>in-memory|AWS on moto|durable SDK runner), "
        r"(?:(?P<mode>per step|batched), )?(?P<run>[\d,]+ steps(?: \+ [\d,]+ sleeps)?)"
    ),
    value=re.compile(
        r"wall (?P<wall>[\d.]+) ms/step, CPU (?P<cpu>[\d.]+) ms/step "
        r"\(median of (?P<runs>\d+)\)"
    ),
    columns=("Driver", "Mode", "Run", "Wall ms / step", "CPU ms / step", "Median of"),
    cells=lambda m, v: (
        m["driver"],
        m["mode"] or "",
        m["run"],
        v["wall"],
        v["cpu"],
        v["runs"],
    ),
)

TOPICS = (
    Topic("1 AWS requests", "Figure 1: AWS requests per step", (PER_RUN,)),
    Topic("2 cost", "Figure 2: cost per million steps", (COST, FANOUT_COST)),
    Topic("3 overhead", "Figure 3: engine overhead per step", (OVERHEAD,)),
    Topic("4 ingest", "Figure 4: event ingest"),
    Topic("5 limits", "Figure 5: scale limits"),
    Topic("6 timers", "Figure 6: timers"),
    Topic("6 time", "Figure 7: time budgets and deliveries"),
    Topic("8 flow control", "Figure 8: flow control"),
    Topic("9 bulk actions", "Figure 9: bulk actions"),
    Topic("10 fan-out", "Figure 10: fan-out"),
)


def markdown_table(columns: Sequence[str], body: Sequence[Sequence[str]]) -> str:
    """A Markdown table; a ``|`` inside a cell is escaped so it stays one cell."""

    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"

    return "\n".join(
        [line(columns), "|" + "|".join("---" for _ in columns) + "|", *map(line, body)]
    )


def remaining_table(rows: Sequence[Row]) -> str:
    """Rows as measurement and value, with target and result when any row has a target."""
    if any(r.target or r.verdict for r in rows):
        columns: tuple[str, ...] = ("Measurement", "Value", "Target", "Result")
        body = [(r.measurement, r.value, r.target, r.verdict) for r in rows]
    else:
        columns = ("Measurement", "Value")
        body = [(r.measurement, r.value) for r in rows]
    return markdown_table(columns, body)


def topic_section(topic: Topic, rows: Sequence[Row], level: str = "###") -> str:
    """The topic's heading, its column tables, then its remaining rows."""
    parts = [f"{level} {topic.heading}"]
    left = list(rows)
    for table in topic.tables:
        split = [(row, table.split(row)) for row in left]
        body = [cells for _, cells in split if cells is not None]
        left = [row for row, cells in split if cells is None]
        if body:
            parts.append(f"{table.title}:\n\n{markdown_table(table.columns, body)}")
    if left:
        title = "Targets and other measurements" if topic.tables else "Measurements"
        parts.append(f"{title}:\n\n{remaining_table(left)}")
    return "\n\n".join(parts)


def sections(rows: Sequence[Row]) -> str:
    """Every topic with rows, in the bench's order; rows of an unknown figure come last."""
    known = {topic.figure for topic in TOPICS}
    out = [
        topic_section(topic, [r for r in rows if r.figure == topic.figure])
        for topic in TOPICS
        if any(r.figure == topic.figure for r in rows)
    ]
    for figure in dict.fromkeys(r.figure for r in rows if r.figure not in known):
        out.append(topic_section(Topic(figure, figure), [r for r in rows if r.figure == figure]))
    return "\n\n".join(out)
