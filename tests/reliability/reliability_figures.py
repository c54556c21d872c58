"""The Reliability page's figures (``docs/reliability.md``), written from the totals of the
run that produced them.

A session given ``--reliability-totals PATH`` writes its totals there (``make suite`` for the
default sweep, ``make test-reliability`` for the full one). This module renders the page's
"Figures" blocks from those files and checks or rewrites them:

    python tests/reliability/reliability_figures.py check  .reliability/default.json
    python tests/reliability/reliability_figures.py write  .reliability/default.json

``check`` compares a run's totals with the recorded ones in ``figures/`` (must-be-zero figures
exactly, counts within :data:`TOLERANCE`); ``write`` records a run's totals there and rewrites
the page from them.
"""

from __future__ import annotations

import json
import re
import sys
import textwrap
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "reliability.md"
FIGURES_DIR = Path(__file__).resolve().parent / "figures"
SWEEPS = ("default", "full")
OPTION = "--reliability-totals"

#: The rows of the default-sweep table: label, then the figures it shows (joined by " / ").
TABLE_ROWS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "crash points swept (process killed at an AWS call or dispatch of the saga, a per-step "
        "run and a flow-control scenario)",
        ("crash_points",),
    ),
    ("... refused (killed before the call was sent)", ("crash_points_refused",)),
    ("... applied (killed after the service applied it, answer lost)", ("crash_points_applied",)),
    ("runs recovered after a crash", ("crash_recoveries",)),
    (
        "storage calls of a per-step run and of a flow-control scenario failed past botocore's "
        "retries (all / refused / applied)",
        ("outage_points", "outage_points_refused", "outage_points_applied"),
    ),
    (
        "... DynamoDB / S3 / Scheduler / SQS calls",
        (
            "outage_points_dynamodb",
            "outage_points_s3",
            "outage_points_scheduler",
            "outage_points_sqs",
        ),
    ),
    (
        "storage errors injected into per-step runs (all / refused / applied)",
        ("storage_faults", "storage_faults_refused", "storage_faults_applied"),
    ),
    ("runs driven again after a transient error (`runs.driven_again`)", ("runs_driven_again",)),
    ("requests refused for good, ending the run with a code naming it", ("storage_refusals",)),
    ("transient AWS and step-host errors injected", ("transient_faults",)),
    (
        "... AWS errors refused / applied, then the answer lost",
        ("transient_faults_refused", "transient_faults_applied"),
    ),
    ("concurrent races run / operations in them", ("races", "race_operations")),
    ("duplicate, early and late alarms delivered", ("alarms_misdelivered",)),
    ("generated API requests (schemathesis)", ("generated_requests",)),
    ("hand-written hostile inputs", ("bad_inputs",)),
    ("unauthenticated or forged requests refused", ("auth_refusals",)),
    ("invalid step-host answers handled", ("garbage_step_answers",)),
    ("runs checked for their final state", ("runs_checked",)),
    (
        "**runs lost or ending differently** (all / refused / applied)",
        (
            "runs_lost",
            "runs_lost_refused",
            "runs_lost_applied",
        ),
    ),
    ("**runs failed by a transient storage error**", ("runs_failed_transient",)),
    ("step attempts beyond the at-least-once window", ("double_executions",)),
    ("5xx answers to client input", ("server_errors",)),
    ("answers breaking the OpenAPI document", ("schema_violations",)),
)


def write_totals(path: Path, figures: Mapping[str, int], *, full: bool) -> None:
    """Record a session's totals (called by the session that produced them)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    document = {"sweep": "full" if full else "default", "figures": dict(figures)}
    path.write_text(json.dumps(document, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def read_totals(path: Path) -> tuple[str, dict[str, int]]:
    """The sweep name and figures recorded at ``path``."""
    document = json.loads(path.read_text(encoding="utf-8"))
    if document.get("sweep") not in SWEEPS:
        raise ValueError(f"{path}: unknown sweep {document.get('sweep')!r}")
    return document["sweep"], {k: int(v) for k, v in document["figures"].items()}


def _count(value: int) -> str:
    return f"{value:,}"


def render(sweep: str, figures: Mapping[str, int]) -> str:
    """The page's block of one sweep."""
    if sweep == "default":
        lines = ["Default sweep (`make test`), one run:", "", "| Figure | Count |", "|---|---:|"]
        for label, names in TABLE_ROWS:
            lines.append(f"| {label} | {' / '.join(_count(figures[n]) for n in names)} |")
        return "\n".join(lines)
    return textwrap.fill(
        f"Full sweep (`make test-reliability`), one run: {_count(figures['crash_points'])} "
        f"crash points ({_count(figures['crash_points_refused'])} refused, "
        f"{_count(figures['crash_points_applied'])} applied: every AWS call and dispatch of "
        f"the saga, of a per-step run and of a flow-control scenario in both modes), "
        f"{_count(figures['outage_points'])} storage calls of those runs failed past "
        f"botocore's retries ({_count(figures['outage_points_refused'])} refused, "
        f"{_count(figures['outage_points_applied'])} applied: every DynamoDB, S3, Scheduler "
        f"and SQS call), {_count(figures['runs_failed_transient'])} runs failed by them, "
        f"{_count(figures['transient_faults'])} other transient errors, "
        f"{_count(figures['generated_requests'])} generated requests, "
        f"{_count(figures['races'])} races with {_count(figures['race_operations'])} "
        f"operations, {_count(figures['runs_checked'])} runs checked, "
        f"{_count(figures['runs_lost'])} runs lost and {_count(figures['double_executions'])} "
        "step attempts beyond their window.",
        width=95,
    )


def _markers(sweep: str) -> re.Pattern[str]:
    return re.compile(
        rf"(<!-- reliability-figures:{sweep}:start -->\n)(.*?)(\n<!-- reliability-figures:"
        rf"{sweep}:end -->)",
        re.DOTALL,
    )


def current_block(page: str, sweep: str) -> str:
    """The block of ``sweep`` as the page has it now."""
    found = _markers(sweep).search(page)
    if found is None:
        raise ValueError(f"{PAGE.name} has no reliability-figures:{sweep} markers")
    return found.group(2)


def with_block(page: str, sweep: str, block: str) -> str:
    """``page`` with the block of ``sweep`` replaced."""
    current_block(page, sweep)
    return _markers(sweep).sub(lambda m: m.group(1) + block + m.group(3), page, count=1)


#: Figures that must be zero in every run: compared exactly.
MUST_BE_ZERO = (
    "runs_lost",
    "runs_lost_refused",
    "runs_lost_applied",
    "runs_failed_transient",
    "double_executions",
    "server_errors",
    "schema_violations",
)
#: How far a count may move between two runs of the same code: a few fault points depend on
#: how threads interleave (a race's extra call), so a run under load may see one more or less.
TOLERANCE = 0.02


def drift(recorded: Mapping[str, int], measured: Mapping[str, int]) -> list[str]:
    """The figures of ``measured`` that the recorded ones no longer describe: a must-be-zero
    figure that is not zero, a figure missing on one side, or a count that moved by more than
    :data:`TOLERANCE` (and more than one)."""
    problems = [
        f"{name}: {measured[name]} (must be 0)" for name in MUST_BE_ZERO if measured.get(name)
    ]
    for name in sorted(set(recorded) | set(measured)):
        if name not in recorded or name not in measured:
            problems.append(f"{name}: recorded in only one of the two runs")
            continue
        before, now = recorded[name], measured[name]
        if abs(now - before) > max(1, TOLERANCE * before):
            problems.append(f"{name}: {before:,} recorded, {now:,} measured")
    return problems


def main(argv: Sequence[str]) -> int:
    """``write TOTALS...`` records each sweep's totals and rewrites the page's figures from
    them; ``check TOTALS`` compares a run's totals with the recorded ones (the page must show
    the recorded ones)."""
    if len(argv) < 2 or argv[0] not in ("check", "write"):
        print(__doc__, file=sys.stderr)
        return 2
    page = PAGE.read_text(encoding="utf-8")
    if argv[0] == "write":
        stale: list[str] = []
        for name in argv[1:]:
            sweep, figures = read_totals(Path(name))
            recorded = FIGURES_DIR / f"{sweep}.json"
            if Path(name).resolve() != recorded.resolve():
                write_totals(recorded, figures, full=sweep == "full")
            wanted = render(sweep, figures)
            if current_block(page, sweep) != wanted:
                stale.append(sweep)
                page = with_block(page, sweep, wanted)
        PAGE.write_text(page, encoding="utf-8")
        print(f"docs/reliability.md figures rewritten: {', '.join(stale) or 'unchanged'}")
        return 0
    problems: list[str] = []
    recorded_runs = recorded_totals()
    for name in argv[1:]:
        sweep, measured = read_totals(Path(name))
        recorded = recorded_runs.get(sweep)
        if recorded is None:
            problems.append(f"{sweep}: no recorded totals in {FIGURES_DIR}")
            continue
        if current_block(page, sweep) != render(sweep, recorded):
            problems.append(f"{sweep}: docs/reliability.md does not show the recorded totals")
        problems.extend(f"{sweep}: {problem}" for problem in drift(recorded, measured))
    if problems:
        print(
            "docs/reliability.md figures no longer describe this run ("
            + "; ".join(problems)
            + "); `make reliability-figures RELIABILITY_TOTALS=<this run's totals>` records it",
            file=sys.stderr,
        )
        return 1
    print("docs/reliability.md figures describe this run's totals")
    return 0


def recorded_totals() -> dict[str, dict[str, int]]:
    """The recorded totals of each sweep, by sweep name."""
    found: dict[str, dict[str, int]] = {}
    for sweep in SWEEPS:
        path = FIGURES_DIR / f"{sweep}.json"
        if path.exists():
            name, figures = read_totals(path)
            found[name] = figures
    return found


def totals_path(config: Any) -> Path | None:
    """Where this session writes its totals (``--reliability-totals``), if anywhere."""
    value = config.getoption(OPTION, default=None)
    return Path(value) if value else None


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
