"""The bench's last full output, stored as data: ``bench/results.json``.

``python -m bench --write-docs`` stores the rows it measured here; the Performance page's
tables and charts (``bench/docs_page.py``) are rendered from this file alone, so the page can
be laid out again without measuring again, and every figure on it is one the bench printed.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

from bench.table import Row

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results.json"


@dataclass(frozen=True)
class Results:
    """Every row of one bench run and its one-line summary (rows, targets, seconds)."""

    rows: tuple[Row, ...]
    summary: str


def store(results: Results, path: Path = RESULTS) -> None:
    """Write ``results`` as JSON (one object per row, in the bench's order)."""
    document = {"summary": results.summary, "rows": [asdict(row) for row in results.rows]}
    path.write_text(json.dumps(document, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


def load(path: Path = RESULTS) -> Results:
    """The results stored at ``path``."""
    document = json.loads(path.read_text(encoding="utf-8"))
    rows = tuple(Row(**row) for row in document["rows"])
    return Results(rows=rows, summary=document["summary"])
