"""``relayflow workflows pause|resume|paused|stats``: pause and resume a whole workflow in
one environment (the ``runs:admin`` scope), list the paused ones, and show a workflow's
statistics."""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import quote

from relayflow.cli.commands import EXIT_OK, Console
from relayflow.cli.render import format_duration, format_time, table


def _describe(answer: Mapping[str, Any], verb: str) -> str:
    job = answer.get("job") if isinstance(answer.get("job"), dict) else {}
    assert isinstance(job, dict)
    return (
        f"workflow {answer.get('workflowId')} {verb} in {answer.get('environment')}; "
        f"bulk job {job.get('jobId')} ({job.get('action')}) acts on its runs: "
        f"relayflow runs bulk-status {job.get('jobId')} --follow"
    )


def cmd_pause(args: argparse.Namespace, con: Console) -> int:
    """``relayflow workflows pause``."""
    path = f"/api/workflows/{quote(args.workflow, safe='')}/pause"
    answer = con.client.request("POST", path, body={"environment": args.env, "reason": args.reason})
    if con.json_output:
        con.emit_json(answer)
    else:
        con.line(_describe(answer if isinstance(answer, dict) else {}, "paused"))
    return EXIT_OK


def cmd_resume(args: argparse.Namespace, con: Console) -> int:
    """``relayflow workflows resume``."""
    path = f"/api/workflows/{quote(args.workflow, safe='')}/resume"
    body = {"environment": args.env, "reason": args.reason, "ratePerSecond": args.rate}
    answer = con.client.request("POST", path, body=body)
    if con.json_output:
        con.emit_json(answer)
    else:
        con.line(_describe(answer if isinstance(answer, dict) else {}, "resumed"))
    return EXIT_OK


def paused_table(workflows: Sequence[Mapping[str, Any]]) -> str:
    """One paused workflow a line."""
    rows = [
        [
            str(w.get("workflowId")),
            str(w.get("environment")),
            format_time(w.get("pausedAt")),
            str(w.get("by")),
            str(w.get("reason") or ""),
        ]
        for w in workflows
    ]
    return table(["WORKFLOW", "ENV", "PAUSED AT (UTC)", "BY", "REASON"], rows)


def cmd_paused(args: argparse.Namespace, con: Console) -> int:
    """``relayflow workflows paused``."""
    answer = con.client.request("GET", "/api/paused-workflows", params={"environment": args.env})
    if con.json_output:
        con.emit_json(answer)
        return EXIT_OK
    found = answer.get("workflows", []) if isinstance(answer, dict) else []
    listed = [w for w in found if isinstance(w, dict)]
    con.line(paused_table(listed) if listed else "no workflow is paused")
    return EXIT_OK


def _dollars(value: Any) -> str:
    return f"${value:.6f}" if isinstance(value, int | float) else "-"


def _percent(value: Any) -> str:
    return f"{value * 100:.1f}%" if isinstance(value, int | float) else "-"


def stats_lines(answer: Mapping[str, Any]) -> list[str]:
    """The figures of ``GET /api/workflows/{id}/stats``, one a line."""
    by_status = answer.get("byStatus") or {}
    ended = ", ".join(f"{status} {n}" for status, n in by_status.items() if n)
    duration = answer.get("durationMs") or {}
    cost = answer.get("costUsd") or {}
    waiting = ", ".join(
        f"{group.get('status')} {group.get('count')}{'+' if group.get('capped') else ''}"
        for group in answer.get("waiting") or []
    )
    return [
        f"workflow {answer.get('workflowId')} in {answer.get('environment')}, runs ended "
        f"{format_time(answer.get('since'))} to {format_time(answer.get('until'))} UTC",
        f"runs          {answer.get('runs')}" + (f" ({ended})" if ended else ""),
        f"success rate  {_percent(answer.get('successRate'))}",
        f"duration      p50 {format_duration(duration.get('p50'))}  "
        f"p95 {format_duration(duration.get('p95'))}  mean {format_duration(duration.get('mean'))}",
        f"cost per run  p50 {_dollars(cost.get('p50'))}  p95 {_dollars(cost.get('p95'))}  "
        f"mean {_dollars(cost.get('mean'))} ({cost.get('runs', 0)} runs with recorded usage, "
        f"total {_dollars(cost.get('total'))})",
        f"waiting now   {waiting}",
    ]


def hours_table(hours: Sequence[Mapping[str, Any]]) -> str:
    """The hours that had runs, one a line."""
    rows = [
        [
            format_time(hour.get("hour")),
            str(hour.get("runs")),
            str((hour.get("byStatus") or {}).get("completed", 0)),
            format_duration(hour.get("durationP50Ms")),
            format_duration(hour.get("durationP95Ms")),
        ]
        for hour in hours
        if hour.get("runs")
    ]
    return table(["HOUR (UTC)", "RUNS", "COMPLETED", "P50", "P95"], rows)


def cmd_stats(args: argparse.Namespace, con: Console) -> int:
    """``relayflow workflows stats``."""
    path = f"/api/workflows/{quote(args.workflow, safe='')}/stats"
    params = {"environment": args.env, "from": args.since, "to": args.until}
    answer = con.client.request("GET", path, params=params)
    if con.json_output:
        con.emit_json(answer)
        return EXIT_OK
    figures = answer if isinstance(answer, dict) else {}
    for line in stats_lines(figures):
        con.line(line)
    hours = [h for h in figures.get("hours") or [] if isinstance(h, dict)]
    if args.hourly:
        con.line("")
        con.line(hours_table(hours))
    return EXIT_OK


def add_workflow_commands(
    sub: Any, common: argparse.ArgumentParser, environments: Sequence[str]
) -> None:
    """Add ``workflows pause|resume|paused|stats`` to the ``relayflow`` parser."""
    workflows = sub.add_parser(
        "workflows", help="pause and resume whole workflows, and see their statistics"
    )
    workflows_sub = workflows.add_subparsers(dest="workflows_command", required=True)
    for name, text, handler in (
        ("pause", "hold new runs and pause the runs in flight", cmd_pause),
        ("resume", "start new runs again and resume the paused ones", cmd_resume),
    ):
        p = workflows_sub.add_parser(name, parents=[common], help=text)
        p.add_argument("workflow", help="the workflow id")
        p.add_argument("--env", choices=environments, required=True, help="the environment")
        p.add_argument("--reason", help="why (recorded in the audit log)")
        p.set_defaults(handler=handler)
        if name == "resume":
            p.add_argument(
                "--rate",
                type=float,
                default=50.0,
                help="paused runs resumed per second, at most (%(default)s)",
            )
    p = workflows_sub.add_parser("paused", parents=[common], help="list the paused workflows")
    p.add_argument("--env", choices=environments, help="only this environment")
    p.set_defaults(handler=cmd_paused)
    p = workflows_sub.add_parser(
        "stats", parents=[common], help="a workflow's runs, success rate, duration and cost"
    )
    p.add_argument("workflow", help="the workflow id")
    p.add_argument(
        "--env", choices=environments, default="production", help="the environment (%(default)s)"
    )
    p.add_argument(
        "--since",
        help="start: 24h, 7d (that long ago), epoch ms or an ISO time (24 hours before --until)",
    )
    p.add_argument("--until", help="end: like --since (now by default)")
    p.add_argument("--hourly", action="store_true", help="also print the hours that had runs")
    p.set_defaults(handler=cmd_stats)
