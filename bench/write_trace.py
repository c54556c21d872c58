"""``python -m bench.write_trace [STEPS]``: every DynamoDB write of one sleepy run, priced.

Runs the sleepy workflow (steps separated by one-minute sleeps, per-step checkpoints) on the
metered AWS driver and prints each item write (operation, sort key, old and new size, table
and index write units), then the totals by kind of item. It shows where the write units of
a sleep cycle go; figure 1 reports the same totals.
"""

from __future__ import annotations

import sys
from collections import Counter

from bench import workloads
from bench.aws_meter import PricedWrite, Tally
from bench.moto_stack import MotoStack


def kind_of(write: PricedWrite) -> str:
    """The kind of item a write touched: the header, a page, a checkpoint log entry..."""
    sort_key = write.key[-1] if write.key else ""
    name = sort_key.split("'")[-2] if "'" in sort_key else sort_key
    if name.startswith("#"):
        return name
    return name.split("#", 1)[0] + "#"


def trace(steps: int) -> tuple[list[PricedWrite], Tally]:
    """The priced writes of one sleepy run of ``steps`` steps, and the meter's totals."""
    writes: list[PricedWrite] = []
    with MotoStack(on_write=writes.append) as stack:
        stack.run(workloads.SLEEPY, {"steps": steps})
        tally, _ = stack.take()
    return writes, tally


def main(argv: list[str]) -> None:
    steps = int(argv[0]) if argv else 6
    writes, _ = trace(steps)
    table: Counter[str] = Counter()
    index: Counter[str] = Counter()
    for w in writes:
        indexes = ", ".join(f"{name} {units}" for name, units in w.index_units.items())
        size = "deleted" if w.new_size is None else f"{w.new_size:>5} B"
        print(
            f"{w.operation:<15} {kind_of(w):<6} {size:>9} (was {w.old_size:>5} B) "
            f"WU {w.table_units}{' FAILED' if w.failed else ''}"
            f"{'  index: ' + indexes if indexes else ''}"
        )
        table[f"{w.operation} {kind_of(w)}"] += w.table_units
        index.update(w.index_units)
    print(
        f"\n{steps} steps, {steps - 1} sleeps: {sum(table.values())} table WU, "
        f"{sum(index.values())} index WU"
    )
    for name, units in table.most_common():
        print(f"  {name:<22} {units} WU")
    for name, units in index.most_common():
        print(f"  index {name:<16} {units} WU")


if __name__ == "__main__":
    main(sys.argv[1:])
