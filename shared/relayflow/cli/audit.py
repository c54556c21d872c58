"""``relayflow audit``: the operator actions across runs (pauses, resumes, cancels, redrives,
reruns, upgrades, workflow pauses, bulk jobs), newest first."""

from __future__ import annotations

import argparse
import shlex
from collections.abc import Mapping, Sequence
from typing import Any, get_args

from relayflow.cli.commands import EXIT_OK, Console
from relayflow.cli.render import format_time, table
from relayflow.operations.ports import AuditKind

KINDS: tuple[str, ...] = get_args(AuditKind)
#: (argument, flag, query parameter) of each filter.
_FILTERS = (
    ("env", "--env", "environment"),
    ("kind", "--kind", "kind"),
    ("workflow", "--workflow", "workflowId"),
    ("run", "--run", "runId"),
    ("since", "--since", "since"),
    ("until", "--until", "until"),
)


def audit_table(entries: Sequence[Mapping[str, Any]]) -> str:
    """The ``audit`` table: one action a line."""
    rows = [
        [
            format_time(entry.get("at")),
            str(entry.get("kind", "?")),
            str(entry.get("by", "?")),
            str(entry.get("environment", "?")),
            str(entry.get("workflowId") or "-"),
            str(entry.get("runId") or "-"),
            str(entry.get("reason") or ""),
        ]
        for entry in entries
    ]
    return table(["AT (UTC)", "KIND", "BY", "ENV", "WORKFLOW", "RUN", "REASON"], rows)


def _next_page_command(args: argparse.Namespace, cursor: str) -> str:
    words = ["relayflow", "audit"]
    for attribute, flag, _ in _FILTERS:
        value = getattr(args, attribute, None)
        if value is not None:
            words += [flag, str(value)]
    return shlex.join([*words, "--limit", str(args.limit), "--cursor", cursor])


def cmd_audit(args: argparse.Namespace, con: Console) -> int:
    """``relayflow audit``."""
    params: dict[str, Any] = {name: getattr(args, attr) for attr, _, name in _FILTERS}
    params.update(limit=args.limit, cursor=args.cursor)
    page = con.client.request("GET", "/api/audit", params=params)
    if con.json_output:
        con.emit_json(page)
        return EXIT_OK
    page = page if isinstance(page, dict) else {}
    entries = [e for e in page.get("entries", []) if isinstance(e, dict)]
    con.line(audit_table(entries) if entries else "no actions recorded")
    cursor = page.get("nextCursor")
    if cursor:
        con.line(f"\nmore: {_next_page_command(args, str(cursor))}")
    return EXIT_OK


def add_audit_command(
    sub: Any, common: argparse.ArgumentParser, environments: Sequence[str]
) -> None:
    """Add the ``audit`` command to the ``relayflow`` parser."""
    p = sub.add_parser(
        "audit", parents=[common], help="list operator actions across runs, newest first"
    )
    p.add_argument("--env", choices=environments, help="only actions in this environment")
    p.add_argument("--kind", choices=KINDS, help="only actions of this kind")
    p.add_argument("--workflow", help="only actions on this workflow id")
    p.add_argument("--run", help="only actions on this run id")
    p.add_argument("--since", help="at or after (epoch ms or RFC 3339; default 90 days ago)")
    p.add_argument("--until", help="before (epoch ms or RFC 3339; default now)")
    p.add_argument("--limit", type=int, default=20, help="page size (%(default)s)")
    p.add_argument("--cursor", help="the cursor printed by the previous page")
    p.set_defaults(handler=cmd_audit)
