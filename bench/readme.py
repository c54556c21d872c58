"""The README's Performance table is the bench's own output: ``python -m bench --write-readme``
stores the table in ``bench/results.md`` and copies it between the README's markers, and
``tests/bench/test_readme_figures.py`` checks that the two still agree."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results.md"
README = ROOT / "README.md"
BEGIN = "<!-- bench:begin (written by python -m bench --write-readme) -->"
END = "<!-- bench:end -->"


def block(readme: str) -> str:
    """The text between the README's bench markers."""
    start = readme.index(BEGIN) + len(BEGIN)
    return readme[start : readme.index(END, start)].strip("\n")


def write(table: str, summary: str) -> None:
    """Store the latest table and put it into the README."""
    results = f"{table}\n\n{summary}"
    RESULTS.write_text(results + "\n", encoding="utf-8")
    readme = README.read_text(encoding="utf-8")
    start = readme.index(BEGIN) + len(BEGIN)
    end = readme.index(END, start)
    README.write_text(f"{readme[:start]}\n{results}\n{readme[end:]}", encoding="utf-8")
