"""``relayflow schedules list|pause|resume|trigger``: operate a deployment's schedules."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

from relayflow.cli.commands import EXIT_OK, Console
from relayflow.cli.render import pick, table


def _path(schedule_id: str, action: str) -> str:
    return f"/api/schedules/{quote(schedule_id, safe='')}/{action}"


def schedules_table(schedules: list[dict[str, Any]]) -> str:
    """The ``schedules list`` table."""
    rows = []
    for item in schedules:
        declaration = item.get("declaration") or {}
        kind = str(item.get("kind", "?"))
        when = f"{kind} {declaration.get(kind, '')}".strip()
        state = "paused" if item.get("paused") else ("fired" if item.get("fired") else "active")
        upcoming = item.get("nextFireTimes") or []
        rows.append(
            [
                str(item.get("id", "?")),
                str(item.get("workflowId", "?")),
                str(pick(item, "name", default="-")),
                when,
                str(item.get("timezone", "UTC")),
                str(item.get("overlap", "skip")),
                state,
                str(upcoming[0]) if upcoming else "-",
            ]
        )
    headers = ["SCHEDULE", "WORKFLOW", "NAME", "WHEN", "TZ", "OVERLAP", "STATE", "NEXT (UTC)"]
    return table(headers, rows)


def cmd_schedules_list(args: argparse.Namespace, con: Console) -> int:
    """``relayflow schedules list``."""
    answer = con.client.request("GET", "/api/schedules", params={"environment": args.env})
    if con.json_output:
        con.emit_json(answer)
        return EXIT_OK
    schedules = answer.get("schedules", []) if isinstance(answer, dict) else []
    con.line(schedules_table(schedules) if schedules else f"no schedules in {args.env}")
    return EXIT_OK


def _change(action: str) -> Callable[[argparse.Namespace, Console], int]:
    def command(args: argparse.Namespace, con: Console) -> int:
        answer = con.client.request(
            "POST", _path(args.schedule_id, action), params={"environment": args.env}
        )
        if con.json_output:
            con.emit_json(answer)
        elif action == "trigger":
            run = pick(answer, "runId", default="-")
            con.line(f"{answer.get('scheduleId')}  {answer.get('status')}  {run}")
        else:
            state = "paused" if answer.get("paused") else "active"
            con.line(f"{answer.get('id')}  {state}")
        return EXIT_OK

    command.__doc__ = f"``relayflow schedules {action} ID``."
    return command


def add_schedule_commands(
    sub: Any, common: argparse.ArgumentParser, env_option: Callable[[argparse.ArgumentParser], None]
) -> None:
    """Add the ``schedules`` command group to the ``relayflow`` parser."""
    group = sub.add_parser("schedules", help="list, pause, resume and fire schedules")
    actions = group.add_subparsers(dest="schedules_command", metavar="ACTION", required=True)
    p = actions.add_parser("list", parents=[common], help="schedules and their next fire times")
    env_option(p)
    p.set_defaults(handler=cmd_schedules_list)
    for action, text in (
        ("pause", "stop a schedule firing (kept across manifest pushes)"),
        ("resume", "let a paused schedule fire again"),
        ("trigger", "fire a schedule now"),
    ):
        p = actions.add_parser(action, parents=[common], help=text)
        p.add_argument("schedule_id", metavar="ID")
        env_option(p)
        p.set_defaults(handler=_change(action))
