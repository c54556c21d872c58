"""The README's Performance table is the bench's last output (``bench/results.md``), as
written by ``python -m bench --write-readme``: a figure typed by hand fails here."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench import readme


def test_the_readme_table_is_the_last_bench_output() -> None:
    results = readme.RESULTS.read_text(encoding="utf-8").strip("\n")
    assert readme.block(readme.README.read_text(encoding="utf-8")) == results


def test_the_last_bench_output_is_a_full_run_of_every_figure() -> None:
    results = readme.RESULTS.read_text(encoding="utf-8")
    assert "(quick sizes)" not in results
    for figure in ("| 1 AWS requests", "| 2 cost", "| 3 overhead", "| 4 ingest", "| 5 limits"):
        assert figure in results
    assert "per step, marginal cost of a step, 1,000->10,000 steps" in results
