"""``relayflow concurrency show|release``: a concurrency key's holders and queue, and the
release of a slot that a run which ended still holds."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

from relayflow.cli.commands import EXIT_OK, Console
from relayflow.cli.render import table


def _path(workflow_id: str, action: str = "") -> str:
    return f"/api/workflows/{quote(workflow_id, safe='')}/concurrency{action}"


def key_lines(answer: dict[str, Any]) -> list[str]:
    """The ``concurrency show`` view: the key's occupancy, then its holders and queue."""
    key = answer.get("key") or "(whole workflow)"
    lines = [
        f"{answer.get('workflowId', '?')}  key {key}: {answer.get('inUse', 0)} of "
        f"{answer.get('limit', '?')} in use ({answer.get('strategy', '?')})"
    ]
    holders = answer.get("holders") or []
    queue = answer.get("queue") or []
    if holders:
        rows = [[str(h.get("runId", "?")), str(h.get("since", "-"))] for h in holders]
        lines.append(table(["HOLDER", "SINCE"], rows))
    if queue:
        rows = [
            [str(q.get(field, "-")) for field in ("position", "runId", "priority", "queuedAt")]
            for q in queue
        ]
        lines.append(table(["#", "QUEUED", "PRIORITY", "SINCE"], rows))
    elif not holders:
        lines.append("no run holds or waits for this key")
    return lines


def cmd_concurrency_show(args: argparse.Namespace, con: Console) -> int:
    """``relayflow concurrency show WORKFLOW [--key K]``."""
    params = {"environment": args.env, "key": args.key}
    answer = con.client.request("GET", _path(args.workflow), params=params)
    if con.json_output:
        con.emit_json(answer)
        return EXIT_OK
    for line in key_lines(answer if isinstance(answer, dict) else {}):
        con.line(line)
    return EXIT_OK


def cmd_concurrency_release(args: argparse.Namespace, con: Console) -> int:
    """``relayflow concurrency release WORKFLOW RUN_ID [--key K]``."""
    body: dict[str, Any] = {"runId": args.run_id}
    if args.key is not None:
        body["key"] = args.key
    answer = con.client.request(
        "POST", _path(args.workflow, "/release"), params={"environment": args.env}, body=body
    )
    if con.json_output:
        con.emit_json(answer)
        return EXIT_OK
    done = answer if isinstance(answer, dict) else {}
    what = "released" if done.get("released") else "held no slot or queue place"
    started = ", ".join(done.get("started") or []) or "none"
    con.line(f"{done.get('runId', args.run_id)}  {what}; started: {started}")
    return EXIT_OK


def add_concurrency_commands(
    sub: Any, common: argparse.ArgumentParser, env_option: Callable[[argparse.ArgumentParser], None]
) -> None:
    """Add the ``concurrency`` command group to the ``relayflow`` parser."""
    group = sub.add_parser("concurrency", help="list a concurrency key's slots, free a stuck one")
    actions = group.add_subparsers(dest="concurrency_command", metavar="ACTION", required=True)
    p = actions.add_parser("show", parents=[common], help="a key's holders and queue")
    p.add_argument("workflow", metavar="WORKFLOW", help="workflow id")
    p.add_argument("--key", help="the concurrency key (omit for a limit over the workflow)")
    env_option(p)
    p.set_defaults(handler=cmd_concurrency_show)
    p = actions.add_parser(
        "release",
        parents=[common],
        help="free the slot an ended run still holds and start the next queued run",
    )
    p.add_argument("workflow", metavar="WORKFLOW", help="workflow id")
    p.add_argument("run_id", metavar="RUN_ID")
    p.add_argument("--key", help="the key (default: the one the run was admitted under)")
    env_option(p)
    p.set_defaults(handler=cmd_concurrency_release)
