"""``relayflow runs bulk|bulk-status|bulk-list``: act on every run a filter matches (after a
dry run and a confirmation), follow a bulk job's progress, list bulk jobs."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from typing import Any, TextIO, get_args
from urllib.parse import quote

from relayflow.cli.commands import EXIT_OK, EXIT_REFUSED, Console
from relayflow.cli.render import table
from relayflow.cli.values import UsageError, parse_json_arg
from relayflow.core.record import RunStatus

ACTIONS = ("cancel", "pause", "resume", "redrive", "rerun", "upgrade")
STATUSES: tuple[str, ...] = get_args(RunStatus)
#: A job run in one of these has ended: ``--follow`` stops.
_ENDED = {"completed", "failed", "cancelled", "compensated", "compensation_failed"}
_PATH = "/api/bulk-actions"


def _instant(text: str | None) -> int | str | None:
    """Epoch ms as a number, anything else as given (the API parses RFC 3339)."""
    return int(text) if text is not None and text.isdigit() else text


def bulk_body(args: argparse.Namespace) -> dict[str, Any]:
    """The ``POST /api/bulk-actions`` body of ``relayflow runs bulk``."""
    run_filter = {
        "environment": args.env,
        "workflowId": args.workflow,
        "statuses": args.status or None,
        "tag": args.tag,
        "codeVersion": args.version,
        "since": _instant(args.since),
        "until": _instant(args.until),
    }
    options: dict[str, Any] = {}
    if args.compensate:
        options["compensate"] = True
    if args.from_step is not None:
        options["fromStep"] = args.from_step
    if args.input is not None:
        options["input"] = parse_json_arg(args.input, what="--input")
    if args.retry is not None:
        options["retry"] = parse_json_arg(args.retry, what="--retry")
    body: dict[str, Any] = {
        "action": args.action,
        "filter": {k: v for k, v in run_filter.items() if v is not None},
        "concurrency": args.concurrency,
    }
    if args.reason is not None:
        body["reason"] = args.reason
    if options:
        body["options"] = options
    return body


def _confirmed(question: str, con: Console, answers: TextIO) -> bool:
    con.out.write(f"{question} [y/N] ")
    con.out.flush()
    return answers.readline().strip().lower() in {"y", "yes"}


def cmd_runs_bulk(args: argparse.Namespace, con: Console) -> int:
    """``relayflow runs bulk ACTION``: count the matches, confirm, start the job."""
    body = bulk_body(args)
    if not body["filter"]:
        raise UsageError(
            "give a filter: --workflow, --status, --tag, --version, --since, --until or --env"
        )
    counted = con.client.request("POST", _PATH, body={**body, "dryRun": True})
    matched = int(counted.get("matched", 0)) if isinstance(counted, dict) else 0
    if args.dry_run:
        if con.json_output:
            con.emit_json(counted)
        else:
            con.line(f"{matched} runs match; nothing was changed (dry run)")
        return EXIT_OK
    if not con.json_output:
        con.line(f"{matched} runs match now")
    if not args.yes and not _confirmed(f"{args.action} them?", con, sys.stdin):
        con.err.write("relayflow: nothing was done\n")
        return EXIT_REFUSED
    job = con.client.request("POST", _PATH, body=body)
    if con.json_output:
        con.emit_json(job)
        return EXIT_OK
    job_id = job.get("jobId", "?") if isinstance(job, dict) else "?"
    con.line(f"bulk job {job_id} started")
    con.line(f"follow it: relayflow runs bulk-status {job_id} --follow")
    return EXIT_OK


def progress_line(job: dict[str, Any]) -> str:
    """One line of a job's progress."""
    return (
        f"{job.get('jobId', '?')}  {job.get('action', '?')}  {job.get('status', '?')}: "
        f"matched {job.get('matched', 0)}, done {job.get('done', 0)}, "
        f"skipped {job.get('skipped', 0)}, failed {job.get('failed', 0)}"
    )


def cmd_runs_bulk_status(
    args: argparse.Namespace,
    con: Console,
    *,
    sleep: Callable[[float], None] = time.sleep,
    monotonic: Callable[[], float] = time.monotonic,
) -> int:
    """``relayflow runs bulk-status JOB_ID [--follow]``."""
    path = f"{_PATH}/{quote(args.job_id, safe='')}"
    job = con.client.request("GET", path)
    deadline = monotonic() + args.timeout
    while args.follow and job.get("status") not in _ENDED and monotonic() < deadline:
        if not con.json_output:
            con.line(progress_line(job))
        sleep(args.interval)
        job = con.client.request("GET", path)
    if con.json_output:
        con.emit_json(job)
        return EXIT_OK
    con.line(progress_line(job))
    for reason in job.get("reasons") or []:
        con.line(
            f"  {reason.get('outcome')} {reason.get('runId')}: {reason.get('code')} "
            f"{reason.get('message', '')}".rstrip()
        )
    return EXIT_OK


def cmd_runs_bulk_list(args: argparse.Namespace, con: Console) -> int:
    """``relayflow runs bulk-list``."""
    answer = con.client.request("GET", _PATH, params={"limit": args.limit, "cursor": args.cursor})
    if con.json_output:
        con.emit_json(answer)
        return EXIT_OK
    jobs = answer.get("jobs") or []
    if not jobs:
        con.line("no bulk jobs")
        return EXIT_OK
    rows = [
        [
            str(j.get("jobId")),
            str(j.get("action")),
            str(j.get("status")),
            *(str(j.get(k, 0)) for k in ("matched", "done", "skipped", "failed")),
            str(j.get("by")),
        ]
        for j in jobs
    ]
    con.line(table(["JOB", "ACTION", "STATUS", "MATCHED", "DONE", "SKIPPED", "FAILED", "BY"], rows))
    if answer.get("nextCursor"):
        con.line(f"more: --cursor {answer['nextCursor']}")
    return EXIT_OK


def add_bulk_commands(
    runs_sub: Any, common: argparse.ArgumentParser, envs: tuple[str, ...]
) -> None:
    """Add ``bulk``, ``bulk-status`` and ``bulk-list`` to the ``runs`` command group."""
    p = runs_sub.add_parser(
        "bulk", parents=[common], help="act on every run a filter matches (a bulk job)"
    )
    p.add_argument("action", choices=ACTIONS)
    p.add_argument("--workflow", help="only runs of this workflow id")
    p.add_argument(
        "--status",
        action="append",
        choices=STATUSES,
        help="only runs with this status (repeatable)",
    )
    p.add_argument("--tag", help="only runs with this tag")
    p.add_argument("--version", help="only runs on this build (see relayflow versions)")
    p.add_argument("--since", help="started at or after (epoch ms or RFC 3339)")
    p.add_argument("--until", help="started before (epoch ms or RFC 3339)")
    p.add_argument("--env", choices=envs, help="only runs of this environment")
    p.add_argument(
        "--concurrency", type=int, default=8, help="runs acted on at once, 1-32 (%(default)s)"
    )
    p.add_argument("--reason", help="recorded on every run and in the audit log")
    p.add_argument("--compensate", action="store_true", help="cancel: compensate first")
    p.add_argument("--from-step", help="rerun: the top-level step to rerun from")
    p.add_argument("--input", help="rerun: a new input as JSON, or @file.json")
    p.add_argument("--retry", help='redrive: the failed steps\' retry, as JSON: {"max": 5}')
    p.add_argument("--dry-run", action="store_true", help="count the matches, change nothing")
    p.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    p.set_defaults(handler=cmd_runs_bulk)

    p = runs_sub.add_parser("bulk-status", parents=[common], help="a bulk job's progress")
    p.add_argument("job_id", metavar="JOB_ID")
    p.add_argument("--follow", action="store_true", help="poll until the job ends")
    p.add_argument(
        "--interval", type=float, default=2.0, help="seconds between polls (%(default)s)"
    )
    p.add_argument("--timeout", type=float, default=3600.0, help="seconds to follow (%(default)s)")
    p.set_defaults(handler=cmd_runs_bulk_status)

    p = runs_sub.add_parser("bulk-list", parents=[common], help="bulk jobs, newest first")
    p.add_argument("--limit", type=int, default=20, help="page size (%(default)s)")
    p.add_argument("--cursor", help="the cursor printed by the previous page")
    p.set_defaults(handler=cmd_runs_bulk_list)
