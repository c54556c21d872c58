"""``relayflow runs export`` (recorded histories into files) and ``relayflow replay`` (check
an app's code against them before it ships)."""

from __future__ import annotations

import argparse
from dataclasses import asdict
from pathlib import Path
from typing import Any
from urllib.parse import quote

from relayflow.cli.app_loader import AppLoadError, load_app
from relayflow.cli.commands import EXIT_OK, EXIT_REFUSED, Console
from relayflow.cli.values import UsageError
from relayflow.errors import WorkflowNotFoundError
from relayflow.run_history import HistoryFileError, parse_history, write_history
from relayflow.testing.replay import ReplayReport, load, replay

#: The most runs one ``runs export`` lists by its filters.
MAX_EXPORT = 1_000
_PAGE = 100


def add_replay_commands(
    sub: argparse._SubParsersAction[argparse.ArgumentParser],
    runs_sub: argparse._SubParsersAction[argparse.ArgumentParser],
    common: argparse.ArgumentParser,
    environments: tuple[str, ...],
) -> None:
    """``relayflow runs export`` and ``relayflow replay``."""
    p = runs_sub.add_parser(
        "export",
        parents=[common],
        help="write runs' recorded histories (with their values) into files, one per run",
    )
    p.add_argument("run_ids", metavar="RUN_ID", nargs="*", help="runs to export")
    p.add_argument("--workflow", help="without RUN_IDs: runs of this workflow id")
    p.add_argument("--status", help="without RUN_IDs: runs with this status")
    p.add_argument("--env", choices=environments, help="without RUN_IDs: runs of this environment")
    p.add_argument(
        "--limit", type=int, default=20, help="without RUN_IDs: the newest N runs (%(default)s)"
    )
    p.add_argument("-o", "--output", required=True, help="folder to write the files into")
    p.set_defaults(handler=cmd_runs_export)

    p = sub.add_parser(
        "replay",
        help="replay recorded histories against an app's code; exit 1 on any divergence",
    )
    p.add_argument("files", metavar="FILE", nargs="+", help="history files or folders of them")
    p.add_argument("--app", required=True, help="module that defines the workflows")
    p.add_argument("--workflow", help="replay with this workflow id instead of each file's own")
    p.set_defaults(handler=cmd_replay)


def _listed_run_ids(args: argparse.Namespace, con: Console) -> list[str]:
    if not 1 <= args.limit <= MAX_EXPORT:
        raise UsageError(f"--limit must be between 1 and {MAX_EXPORT}")
    ids: list[str] = []
    cursor: str | None = None
    while len(ids) < args.limit:
        page = con.client.list_runs(
            environment=args.env,
            workflow_id=args.workflow,
            status=args.status,
            limit=min(_PAGE, args.limit - len(ids)),
            cursor=cursor,
        )
        ids.extend(str(r["id"]) for r in page.get("runs", []) if isinstance(r, dict))
        cursor = page.get("nextCursor")
        if not cursor:
            break
    return ids


def cmd_runs_export(args: argparse.Namespace, con: Console) -> int:
    """``relayflow runs export``."""
    if args.run_ids and (args.workflow or args.status or args.env):
        raise UsageError("give RUN_IDs or filters (--workflow, --status, --env), not both")
    run_ids = list(args.run_ids) or _listed_run_ids(args, con)
    written: list[dict[str, str]] = []
    for run_id in run_ids:
        answer = con.client.request("GET", f"/api/runs/{quote(run_id, safe='')}/history")
        try:
            history = parse_history(answer)
        except HistoryFileError as exc:
            raise UsageError(f"run {run_id}: the API answered no history: {exc}") from None
        path = write_history(history, args.output)
        written.append({"runId": history.run_id, "status": history.status, "file": str(path)})
    if con.json_output:
        con.emit_json({"exported": written})
    elif not written:
        con.line("no runs to export")
    else:
        for item in written:
            con.line(f"{item['runId']} ({item['status']}) -> {item['file']}")
    return EXIT_OK


def _history_files(names: list[str]) -> list[Path]:
    files: list[Path] = []
    for name in names:
        path = Path(name)
        if path.is_dir():
            found = sorted(path.glob("*.json"))
            if not found:
                raise UsageError(f"{name}: the folder holds no .json history file")
            files.extend(found)
        else:
            files.append(path)
    return files


def cmd_replay(args: argparse.Namespace, con: Console) -> int:
    """``relayflow replay``."""
    try:
        load_app(args.app)
    except AppLoadError as exc:
        raise UsageError(str(exc)) from None
    results: list[tuple[Path, ReplayReport]] = []
    for path in _history_files(args.files):
        try:
            results.append((path, replay(load(path), args.workflow)))
        except (HistoryFileError, WorkflowNotFoundError) as exc:
            message = str(exc) if isinstance(exc, HistoryFileError) else f"{path}: {exc}"
            raise UsageError(message) from None
    failed = [report for _, report in results if not report.ok]
    if con.json_output:
        con.emit_json({"replays": [_report_json(path, r) for path, r in results]})
    else:
        for path, report in results:
            mark = "ok  " if report.ok else "FAIL"
            con.line(f"{mark} {path}: {report.describe()}")
        con.line(
            f"{len(results) - len(failed)} of {len(results)} recorded run(s) replay on this code"
        )
    return EXIT_REFUSED if failed else EXIT_OK


def _report_json(path: Path, report: ReplayReport) -> dict[str, Any]:
    return {
        "file": str(path),
        "runId": report.run_id,
        "workflowId": report.workflow_id,
        "ok": report.ok,
        "outcome": report.outcome,
        "divergences": [asdict(d) for d in report.divergences],
    }
