"""The handlers of the ``relayflow`` sub-commands that talk to a deployment over HTTP.

Each handler takes the parsed arguments and a :class:`Console` and returns the exit status.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from dataclasses import dataclass, field
from typing import Any, TextIO

from relayflow.cli.client import ApiClient
from relayflow.cli.render import (
    TERMINAL_STATUSES,
    compact_json,
    pick,
    run_details,
    runs_table,
    timeline_entries,
)
from relayflow.cli.values import UsageError, parse_json_arg
from relayflow.cli.watch import follow_run
from relayflow.clock import utc_now

EXIT_OK = 0
EXIT_REFUSED = 1
EXIT_USAGE = 2
EXIT_RUN_NOT_COMPLETED = 3


@dataclass
class Console:
    """Where a command writes, and whether it writes JSON."""

    client: ApiClient
    json_output: bool = False
    out: TextIO = field(default_factory=lambda: sys.stdout)
    err: TextIO = field(default_factory=lambda: sys.stderr)

    def emit_json(self, value: Any) -> None:
        """Print ``value`` as indented JSON."""
        self.out.write(json.dumps(value, indent=2, sort_keys=True, default=str) + "\n")

    def line(self, text: str = "") -> None:
        """Print one line of text."""
        self.out.write(text + "\n")


def _wait_ms(seconds: float) -> int:
    # The API drives inline for at most this long before answering; cap it well under the
    # HTTP API's 30 s integration limit.
    return int(max(0.0, min(seconds, 20.0)) * 1000)


def cmd_trigger(args: argparse.Namespace, con: Console) -> int:
    """``relayflow trigger WORKFLOW``."""
    value = parse_json_arg(args.input, what="--input", default={})
    flow = {
        "delay": args.delay,
        "ttl": args.ttl,
        "priority": args.priority,
        "concurrencyKey": args.concurrency_key,
        "debounce": parse_json_arg(args.debounce, what="--debounce", default=None),
        "lockToVersion": args.lock_to_version,
    }
    run = con.client.trigger(
        args.workflow,
        value,
        idempotency_key=args.idempotency_key,
        tags=args.tag or None,
        environment=args.env,
        wait_ms=_wait_ms(args.timeout) if args.wait else None,
        flow={name: given for name, given in flow.items() if given is not None},
    )
    run_id = str(pick(run, "id", "runId", default=""))
    if not args.wait:
        if con.json_output:
            con.emit_json(run)
        else:
            con.line(f"{run_id}  {pick(run, 'status', default='?')}")
        return EXIT_OK
    result = follow_run(
        con.client,
        run_id,
        timeout_s=args.timeout,
        interval_s=args.interval,
        out=None if con.json_output else con.out,
        initial=run if pick(run, "status") in TERMINAL_STATUSES else None,
    )
    return _finish(con, result.run, result.entries, result.finished, args.timeout)


def cmd_runs_list(args: argparse.Namespace, con: Console) -> int:
    """``relayflow runs list``."""
    page = con.client.list_runs(
        environment=args.env,
        workflow_id=args.workflow,
        status=args.status,
        tag=args.tag,
        since=args.since,
        until=args.until,
        code_version=args.version,
        limit=args.limit,
        cursor=args.cursor,
    )
    if con.json_output:
        con.emit_json(page)
        return EXIT_OK
    runs = [r for r in page.get("runs", []) if isinstance(r, dict)]
    if not runs:
        con.line("no runs")
    else:
        con.line(runs_table(runs))
    cursor = page.get("nextCursor")
    if cursor:
        con.line(f"\nmore: {next_page_command(args, str(cursor))}")
    return EXIT_OK


_LIST_FILTERS = (
    ("workflow", "--workflow"),
    ("status", "--status"),
    ("tag", "--tag"),
    ("env", "--env"),
    ("since", "--since"),
    ("until", "--until"),
    ("version", "--version"),
)


def next_page_command(args: argparse.Namespace, cursor: str) -> str:
    """The ``runs list`` command of the next page: same filters and limit, the new cursor."""
    words = ["relayflow", "runs", "list"]
    for attribute, flag in _LIST_FILTERS:
        value = getattr(args, attribute, None)
        if value is not None:
            words += [flag, str(value)]
    words += ["--limit", str(args.limit), "--cursor", cursor]
    return shlex.join(words)


def cmd_runs_get(args: argparse.Namespace, con: Console) -> int:
    """``relayflow runs get ID``."""
    run = con.client.get_run(args.run_id)
    timeline = con.client.timeline(args.run_id)
    if con.json_output:
        con.emit_json({"run": run, "timeline": timeline_entries(timeline)})
    else:
        con.line(run_details(run, timeline_entries(timeline), verbose=args.verbose))
    return EXIT_OK


def cmd_runs_watch(args: argparse.Namespace, con: Console) -> int:
    """``relayflow runs watch ID``."""
    result = follow_run(
        con.client,
        args.run_id,
        timeout_s=args.timeout,
        interval_s=args.interval,
        out=None if con.json_output else con.out,
    )
    return _finish(con, result.run, result.entries, result.finished, args.timeout)


def cmd_runs_cancel(args: argparse.Namespace, con: Console) -> int:
    """``relayflow runs cancel ID``."""
    run = con.client.cancel(args.run_id, reason=args.reason, compensate=args.compensate)
    if con.json_output:
        con.emit_json(run)
    else:
        con.line(f"{pick(run, 'id', default=args.run_id)}  {pick(run, 'status', default='?')}")
    return EXIT_OK


def cmd_runs_action(args: argparse.Namespace, con: Console) -> int:
    """``relayflow runs pause|resume|redrive|rerun|upgrade ID``: the action, then the run as
    ``runs get`` prints it (the new run for a rerun)."""
    body: dict[str, Any] = {}
    if args.reason is not None:
        body["reason"] = args.reason
    if args.runs_command == "redrive":
        initial = args.retry_initial
        if initial is not None and initial.isdigit():
            initial = int(initial)  # whole milliseconds, as the API takes them
        retry = {"max": args.retry_max, "initial": initial}
        retry = {k: v for k, v in retry.items() if v is not None}
        if retry:
            body["retry"] = retry
    if args.runs_command == "rerun":
        body["fromStep"] = args.from_step
        if args.input is not None:
            body["input"] = parse_json_arg(args.input, what="--input")
    run = con.client.run_action(args.run_id, args.runs_command, body)
    run_id = str(pick(run, "id", default=args.run_id))
    timeline = con.client.timeline(run_id)
    if con.json_output:
        con.emit_json({"run": run, "timeline": timeline_entries(timeline)})
    else:
        con.line(run_details(run, timeline_entries(timeline)))
    return EXIT_OK


def cmd_send_event(args: argparse.Namespace, con: Console) -> int:
    """``relayflow send-event NAME``: to the environment's manifest, or to one run."""
    data = parse_json_arg(args.data, what="--data")
    if args.run:
        run = con.client.send_run_event(args.run, args.name, data)
        return _print_run(con, run)
    envelope: dict[str, Any] = {"name": args.name, "emittedAt": _now_iso()}
    if data is not None:
        envelope["data"] = data
    metadata = parse_json_arg(args.metadata, what="--metadata")
    if metadata is not None:
        if not isinstance(metadata, dict):
            raise UsageError("--metadata: must be a JSON object")
        envelope["metadata"] = metadata
    result = con.client.ingest_event(args.env, envelope, idempotency_key=args.idempotency_key)
    if con.json_output:
        con.emit_json(result)
        return EXIT_OK if result.get("ok", True) else EXIT_REFUSED
    if not result.get("ok", True):
        con.err.write(
            f"error: {result.get('reason') or result.get('error')}: {result.get('message', '')}\n"
        )
        return EXIT_REFUSED
    con.line(f"event {result.get('eventId', '?')}")
    matches = [m for m in result.get("matches", []) if isinstance(m, dict)]
    if not matches:
        con.line("  no filter matched")
    for match in matches:
        status = match.get("status", "?")
        target = match.get("targetWorkflowId") or match.get("filterId") or "?"
        detail = match.get("runId") or match.get("reason") or ""
        con.line(f"  {status:<8} {target}  {detail}".rstrip())
    return EXIT_OK


def cmd_signal(args: argparse.Namespace, con: Console) -> int:
    """``relayflow signal RUN NAME``."""
    payload = parse_json_arg(args.payload, what="--payload")
    return _print_run(con, con.client.signal(args.run_id, args.name, payload))


def cmd_token(args: argparse.Namespace, con: Console) -> int:
    """``relayflow token complete|fail|heartbeat [RUN] TOKEN`` (RUN only for chosen ids)."""
    if args.token_action == "complete":
        payload = parse_json_arg(args.payload, what="--payload")
        answer = con.client.complete_token(args.run_id, args.token_id, payload)
    elif args.token_action == "fail":
        answer = con.client.fail_token(args.run_id, args.token_id, args.message, args.code)
    else:
        answer = con.client.heartbeat_token(args.run_id, args.token_id)
    return _print_run(con, answer)


def _print_run(con: Console, run: dict[str, Any]) -> int:
    if con.json_output:
        con.emit_json(run)
    else:
        run_id = pick(run, "id", "runId")
        status = pick(run, "status")
        if run_id is not None and status is not None:
            delivery = run.get("delivery")
            note = ""
            if isinstance(delivery, dict) and delivery.get("status"):
                target = delivery.get("waitpointId")
                note = f"  (delivery {delivery['status']}{f' to {target}' if target else ''})"
            con.line(f"{run_id}  {status}{note}")
        else:
            con.line(compact_json(run, 2000))
    return EXIT_OK


def _finish(
    con: Console,
    run: dict[str, Any],
    entries: list[dict[str, Any]],
    finished: bool,
    timeout_s: float,
) -> int:
    status = pick(run, "status")
    if con.json_output:
        con.emit_json(run)
    else:
        if not finished:
            run_id = pick(run, "id", "runId", default="?")
            con.err.write(
                f"gave up after {timeout_s:g}s: run {run_id} is still {status}\n"
                f"follow it with: relayflow runs watch {run_id}\n"
            )
        elif status == "completed":
            con.line(f"output: {compact_json(run.get('output'), 2000)}")
        else:
            error = run.get("error")
            if isinstance(error, dict):
                con.line(f"error: {error.get('code', '')}: {error.get('message', '')}")
    return EXIT_OK if finished and status == "completed" else EXIT_RUN_NOT_COMPLETED


def _now_iso() -> str:
    return utc_now().isoformat(timespec="milliseconds").replace("+00:00", "Z")
