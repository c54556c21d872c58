"""``python -m bench``: run every benchmark (or ``--only NAME``) and print one table.

``--quick`` runs smaller sizes (under a minute); the default run takes a few minutes on 2
cores; ``--long`` also runs the 1,000-sleep limit (a quarter of an hour on moto).
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
import warnings
from collections.abc import Sequence

from bench import (
    bulk_actions,
    docs_page,
    fig_cost,
    fig_fanout,
    fig_flow,
    fig_ingest,
    fig_limits,
    fig_overhead,
    fig_requests,
    fig_time,
    fig_timers,
)
from bench.results import Results
from bench.table import Row, render

NAMES = (
    fig_requests.NAME,
    fig_cost.NAME,
    fig_overhead.NAME,
    fig_ingest.NAME,
    fig_limits.NAME,
    fig_timers.NAME,
    fig_time.NAME,
    fig_flow.NAME,
    bulk_actions.NAME,
    fig_fanout.NAME,
)


def run(names: Sequence[str], *, quick: bool, long: bool = False) -> list[Row]:
    """Measure the named figures and return their rows, in figure order."""
    rows: list[Row] = []
    requests: fig_requests.RequestsResult | None = None
    if fig_requests.NAME in names or fig_cost.NAME in names:
        sizes: tuple[int, ...] = fig_requests.QUICK_SIZES if quick else fig_requests.SIZES
        if fig_requests.NAME not in names:
            sizes = (100,)
        requests = fig_requests.measure(sizes, sleepy_steps=fig_requests.SLEEPY_STEPS)
    if requests is not None and fig_requests.NAME in names:
        rows += fig_requests.rows(requests)
    if requests is not None and fig_cost.NAME in names:
        rows += fig_cost.rows(requests)
    if fig_overhead.NAME in names:
        rows += fig_overhead.rows(fig_overhead.measure(3 if quick else fig_overhead.RUNS))
    if fig_ingest.NAME in names:
        events = fig_ingest.QUICK_EVENTS if quick else fig_ingest.EVENTS
        rows += fig_ingest.rows(fig_ingest.measure(events))
    if fig_limits.NAME in names:
        long_run = None
        largest = 0
        if requests is not None:
            long_run = max(requests.sequential[fig_requests.PER_STEP], key=lambda r: r.steps)
            largest = max(r.tally.largest_item for r in requests.runs)
        rows += fig_limits.rows(
            fig_limits.measure(
                long_steps=1_000 if quick else fig_limits.LONG_RUN_STEPS,
                sleeps=fig_limits.SLEEPS if long else (100 if quick else fig_limits.DEFAULT_SLEEPS),
                long_run=long_run,
                largest_item_elsewhere=largest,
            )
        )
    if fig_timers.NAME in names:
        rows += fig_timers.rows(quick=quick)
    if fig_time.NAME in names:
        rows += fig_time.rows(fig_time.measure(quick=quick))
    if fig_flow.NAME in names:
        rows += fig_flow.rows(
            fig_flow.measure(),
            fig_flow.flow_local.measure(quick=quick),
            fig_flow.flow_runs.measure(),
        )
    if bulk_actions.NAME in names:
        sizes = bulk_actions.QUICK_SIZES if quick else bulk_actions.SIZES
        rows += bulk_actions.rows(bulk_actions.measure(sizes))
    if fig_fanout.NAME in names:
        rows += fig_fanout.rows(
            fig_fanout.measure(fig_fanout.QUICK_ITEMS if quick else fig_fanout.ITEMS)
        )
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    """Parse flags, run, print the table; exit status 1 when a target failed."""
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="smaller sizes (under a minute)")
    parser.add_argument(
        "--long", action="store_true", help="run the 1,000-sleep limit (slow on moto)"
    )
    parser.add_argument(
        "--only",
        action="append",
        choices=NAMES,
        metavar="NAME",
        help=f"run only this figure (repeatable): {', '.join(NAMES)}",
    )
    parser.add_argument(
        "--write-docs",
        "--write-readme",
        dest="write_docs",
        action="store_true",
        help="store the rows in bench/results.json and lay out docs/performance.md from them",
    )
    args = parser.parse_args(argv)
    names = tuple(args.only or NAMES)
    # Powertools and moto log warnings that are not figures.
    logging.disable(logging.WARNING)
    warnings.simplefilter("ignore")
    start = time.perf_counter()
    rows = run(names, quick=args.quick, long=args.long)
    table = render(rows)
    print(table)
    failed = [r for r in rows if r.verdict == "FAIL"]
    summary = (
        f"{len(rows)} rows, {sum(r.verdict == 'PASS' for r in rows)} targets passed, "
        f"{len(failed)} failed, {time.perf_counter() - start:.0f} s"
        f"{' (quick sizes)' if args.quick else ''}"
    )
    print(f"\n{summary}")
    if args.write_docs:
        docs_page.write(Results(rows=tuple(rows), summary=summary))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
