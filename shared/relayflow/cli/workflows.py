"""``relayflow workflows pause|resume|paused``: pause and resume a whole workflow in one
environment (the ``runs:admin`` scope), and list the paused ones."""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import quote

from relayflow.cli.commands import EXIT_OK, Console
from relayflow.cli.render import format_time, table


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


def add_workflow_commands(
    sub: Any, common: argparse.ArgumentParser, environments: Sequence[str]
) -> None:
    """Add ``workflows pause|resume|paused`` to the ``relayflow`` parser."""
    workflows = sub.add_parser("workflows", help="pause and resume whole workflows")
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
