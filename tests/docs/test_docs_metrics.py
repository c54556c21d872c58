"""The metrics page documents every metric the functions emit, with its unit and dimensions."""

from __future__ import annotations

from pathlib import Path

from relayflow.api import metrics as m

PAGE = Path(__file__).resolve().parents[2] / "docs" / "operations" / "monitoring.md"


def _rows() -> list[str]:
    return [line for line in PAGE.read_text(encoding="utf-8").splitlines() if line.startswith("|")]


def test_every_emitted_metric_has_a_row_with_its_unit_and_dimensions() -> None:
    rows = _rows()
    for name in m.COUNTERS:
        (row,) = [row for row in rows if f"`{name}`" in row]
        per_workflow = "+ workflow" in row
        assert per_workflow == (name in m.WORKFLOW_COUNTERS), name
        assert "| Count |" in row, name
    for name, unit in m.WORKFLOW_GAUGES.items():
        (row,) = [row for row in rows if f"`{name}`" in row]
        assert f"| {unit} (gauge) | + workflow |" in row


def test_every_dimension_is_explained() -> None:
    rows = _rows()
    for dimension in ("service", m.ENVIRONMENT_DIMENSION, m.WORKFLOW_DIMENSION):
        assert any(row.startswith(f"| `{dimension}` |") for row in rows), dimension
