"""``relayflow versions``: the code versions live runs are on, per workflow, to tell when an
old build can be retired and which runs wait for one that is gone."""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from typing import Any

from relayflow.cli.commands import EXIT_OK, Console
from relayflow.cli.render import table


def versions_table(versions: Sequence[Mapping[str, Any]]) -> str:
    """The ``versions`` table: one workflow and build a line, most runs first."""
    rows = [
        [
            str(line.get("workflowId", "?")),
            str(line.get("environment", "?")),
            str(line.get("build") or "-"),
            str(line.get("function") or "-"),
            str(line.get("runs", 0)),
            str(line.get("waitingForVersion", 0)),
        ]
        for line in versions
    ]
    return table(["WORKFLOW", "ENV", "BUILD", "FUNCTION", "LIVE RUNS", "WAITING"], rows)


def cmd_versions(args: argparse.Namespace, con: Console) -> int:
    """``relayflow versions``."""
    params = {"environment": args.env, "workflowId": args.workflow}
    answer = con.client.request("GET", "/api/versions", params=params)
    if con.json_output:
        con.emit_json(answer)
        return EXIT_OK
    answer = answer if isinstance(answer, dict) else {}
    versions = [v for v in answer.get("versions", []) if isinstance(v, dict)]
    con.line(versions_table(versions) if versions else "no live runs")
    if answer.get("truncated"):
        con.line(f"\ncounted the newest {answer.get('runsRead', '?')} live runs only")
    if any(v.get("waitingForVersion") for v in versions):
        con.line(
            "\nruns waiting for their version: relayflow runs list --version BUILD, then "
            "relayflow runs upgrade RUN (or runs bulk upgrade)"
        )
    return EXIT_OK


def add_versions_command(
    sub: Any, common: argparse.ArgumentParser, environments: Sequence[str]
) -> None:
    """Add the ``versions`` command to the ``relayflow`` parser."""
    p = sub.add_parser(
        "versions", parents=[common], help="count the live runs on each code version"
    )
    p.add_argument("--env", choices=environments, help="only runs of this environment")
    p.add_argument("--workflow", help="only runs of this workflow id")
    p.set_defaults(handler=cmd_versions)
