"""The Performance page (``docs/performance.md``) shows the bench's own output.

``python -m bench --write-docs`` stores what it measured in ``bench/results.json`` and lays
it out between the page's markers: one section per figure, narrow tables, and charts drawn
from the same rows into ``docs/assets/``. ``python -m bench.docs_page`` lays the page out
again from the stored results without measuring; ``tests/docs/test_performance_figures.py``
checks that the page and the charts are what the stored results give.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from bench import docs_charts, docs_tables
from bench.results import RESULTS, ROOT, Results, load, store

PAGE = ROOT / "docs" / "performance.md"
ASSETS = ROOT / "docs" / "assets"
BEGIN = "<!-- bench:begin (written by python -m bench --write-docs) -->"
END = "<!-- bench:end -->"


def block(page: str) -> str:
    """The text between the page's bench markers."""
    start = page.index(BEGIN) + len(BEGIN)
    return page[start : page.index(END, start)].strip("\n")


def render(results: Results, charts: Sequence[docs_charts.Chart]) -> str:
    """What goes between the markers: the run's summary, the charts, then every figure."""
    pictures = [f"![{chart.alt}](assets/{chart.file})" for chart in charts]
    return "\n\n".join(
        [f"Summary of the run: {results.summary}.", *pictures, docs_tables.sections(results.rows)]
    )


def lay_out(results: Results, page: Path = PAGE, assets: Path = ASSETS) -> None:
    """Draw the charts and put the tables between the page's markers."""
    charts = docs_charts.draw(results.rows, assets)
    text = page.read_text(encoding="utf-8")
    start = text.index(BEGIN) + len(BEGIN)
    end = text.index(END, start)
    body = render(results, charts)
    page.write_text(f"{text[:start]}\n{body}\n{text[end:]}", encoding="utf-8")


def write(results: Results) -> None:
    """Store a bench run's results and lay the page out from them."""
    store(results)
    lay_out(results)


def main(argv: Sequence[str] | None = None) -> int:
    """Lay the page out again from the stored results (``bench/results.json``)."""
    del argv
    lay_out(load(RESULTS))
    print(f"{PAGE.relative_to(ROOT)}: laid out from {RESULTS.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
