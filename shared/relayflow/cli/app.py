"""The ``relayflow`` command line: argument parsing and dispatch to the sub-command handlers."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Callable, Sequence
from typing import TextIO

from relayflow import __version__
from relayflow.cli.audit import add_audit_command
from relayflow.cli.bulk import add_bulk_commands
from relayflow.cli.client import DEFAULT_URL, TOKEN_HINT, ApiClient, ApiRequestError, api_base_url
from relayflow.cli.commands import (
    EXIT_REFUSED,
    EXIT_USAGE,
    Console,
    cmd_runs_action,
    cmd_runs_cancel,
    cmd_runs_get,
    cmd_runs_list,
    cmd_runs_watch,
    cmd_send_event,
    cmd_signal,
    cmd_token,
    cmd_trigger,
)
from relayflow.cli.concurrency import add_concurrency_commands
from relayflow.cli.init import add_init_command, run_init
from relayflow.cli.manifest import cmd_manifest_build, cmd_manifest_push, cmd_manifest_show
from relayflow.cli.replay import add_replay_commands
from relayflow.cli.schedules import add_schedule_commands
from relayflow.cli.values import UsageError
from relayflow.cli.versions import add_versions_command
from relayflow.cli.workflows import add_workflow_commands

Handler = Callable[[argparse.Namespace, Console], int]
ENVIRONMENTS = ("production", "preview", "development")


def _connection_options(*, suppress: bool) -> argparse.ArgumentParser:
    # Given both before and after the sub-command; the copies on sub-commands default to
    # SUPPRESS so they never overwrite a value given earlier on the line.
    parent = argparse.ArgumentParser(add_help=False)
    group = parent.add_argument_group("connection")
    default_url = argparse.SUPPRESS if suppress else os.environ.get("RELAYFLOW_URL", DEFAULT_URL)
    default_token = argparse.SUPPRESS if suppress else os.environ.get("RELAYFLOW_TOKEN")
    # No %(default)s here: the sub-command copies default to SUPPRESS, which argparse cannot
    # format into a help line.
    group.add_argument(
        "--url", default=default_url, help=f"API base URL (env RELAYFLOW_URL; {DEFAULT_URL})"
    )
    group.add_argument("--token", default=default_token, help="bearer token (env RELAYFLOW_TOKEN)")
    group.add_argument(
        "--json",
        action="store_true",
        default=argparse.SUPPRESS if suppress else False,
        help="print the API's JSON answer",
    )
    return parent


def _env_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--env",
        default=os.environ.get("RELAYFLOW_ENV", "development"),
        choices=ENVIRONMENTS,
        help="environment (env RELAYFLOW_ENV; %(default)s)",
    )


def _wait_options(parser: argparse.ArgumentParser, timeout: float) -> None:
    parser.add_argument(
        "--timeout", type=float, default=timeout, help="seconds to wait (%(default)s)"
    )
    parser.add_argument(
        "--interval", type=float, default=0.5, help="seconds between polls (%(default)s)"
    )


def _run_action_parsers(
    runs_sub: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    """``runs pause|resume|redrive|rerun|upgrade ID``."""
    helps = {
        "pause": "pause a running or waiting run",
        "resume": "resume a paused run",
        "redrive": "continue a failed, cancelled or compensation_failed run from its failure",
        "rerun": "start a new run from a top-level step of an ended run",
        "upgrade": "move a run that has not ended to the current version of its code",
    }
    for action, text in helps.items():
        p = runs_sub.add_parser(action, parents=[common], help=text)
        p.add_argument("run_id", metavar="ID")
        p.add_argument("--reason", help="why: recorded on the run and in the audit log")
        p.set_defaults(handler=cmd_runs_action)
        if action == "redrive":
            p.add_argument(
                "--retry-max", type=int, help="attempts of the failed step, the first included"
            )
            p.add_argument(
                "--retry-initial", help="the delay before its second attempt (2s, 500ms...)"
            )
        if action == "rerun":
            p.add_argument("--from-step", required=True, help="the top-level step to rerun from")
            p.add_argument("--input", help="a new input as JSON, or @file.json (default: kept)")


def build_parser() -> argparse.ArgumentParser:
    """The full argument parser of the ``relayflow`` command."""
    common = _connection_options(suppress=True)
    parser = argparse.ArgumentParser(
        prog="relayflow",
        description="Trigger, inspect and steer relayflow runs over HTTP; run the local stack.",
        parents=[_connection_options(suppress=False)],
    )
    parser.add_argument("--version", action="version", version=f"relayflow {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    p = sub.add_parser("trigger", parents=[common], help="start a run")
    p.add_argument("workflow", help="workflow id")
    p.add_argument("--input", help="input as JSON, or @file.json ({} by default)")
    p.add_argument("--idempotency-key", help="a second trigger with the same key returns the run")
    p.add_argument("--tag", action="append", help="tag the run (repeatable)")
    p.add_argument("--env", choices=ENVIRONMENTS, help="environment of the run")
    p.add_argument("--wait", action="store_true", help="follow the run until it ends")
    p.add_argument(
        "--lock-to-version",
        help="the run's workflow version (default v1; must be the manifest's, when one is "
        "registered)",
    )
    flow = p.add_argument_group("flow control (see the flow-control guide)")
    flow.add_argument("--delay", help="start the run this long from now, e.g. 10m")
    flow.add_argument("--ttl", help="cancel the run (TTL_EXPIRED) if it has not started by then")
    flow.add_argument("--priority", type=int, help="queued runs with a higher priority go first")
    flow.add_argument("--concurrency-key", help="the key the run's concurrency limit counts by")
    flow.add_argument(
        "--debounce", help='fold a burst into one run, as JSON: {"key": "user", "delay": "30s"}'
    )
    _wait_options(p, 60.0)
    p.set_defaults(handler=cmd_trigger)

    runs = sub.add_parser("runs", help="list, inspect, watch and operate runs")
    runs_sub = runs.add_subparsers(dest="runs_command", metavar="ACTION", required=True)
    p = runs_sub.add_parser("list", parents=[common], help="list runs, newest first")
    p.add_argument("--workflow", help="only runs of this workflow id")
    p.add_argument("--status", help="only runs with this status")
    p.add_argument("--tag", help="only runs with this tag")
    p.add_argument("--env", choices=ENVIRONMENTS, help="only runs of this environment")
    p.add_argument("--since", help="started at or after (epoch ms or RFC 3339)")
    p.add_argument("--until", help="started before (epoch ms or RFC 3339)")
    p.add_argument("--version", help="only runs on this build (see relayflow versions)")
    p.add_argument("--limit", type=int, default=20, help="page size (%(default)s)")
    p.add_argument("--cursor", help="the cursor printed by the previous page")
    p.set_defaults(handler=cmd_runs_list)
    p = runs_sub.add_parser("get", parents=[common], help="status, output and timeline of a run")
    p.add_argument("run_id", metavar="ID")
    p.add_argument(
        "--verbose",
        action="store_true",
        help="every recorded traceback frame, and the traceback of each failed attempt",
    )
    p.set_defaults(handler=cmd_runs_get)
    p = runs_sub.add_parser("watch", parents=[common], help="follow a run until it ends")
    p.add_argument("run_id", metavar="ID")
    _wait_options(p, 300.0)
    p.set_defaults(handler=cmd_runs_watch)
    p = runs_sub.add_parser("cancel", parents=[common], help="cancel a run")
    p.add_argument("run_id", metavar="ID")
    p.add_argument("--compensate", action="store_true", help="run its compensations first")
    p.add_argument("--reason", help="recorded on the run")
    p.set_defaults(handler=cmd_runs_cancel)
    _run_action_parsers(runs_sub, common)
    add_bulk_commands(runs_sub, common, ENVIRONMENTS)
    add_replay_commands(sub, runs_sub, common, ENVIRONMENTS)

    p = sub.add_parser("send-event", parents=[common], help="emit an event")
    p.add_argument("name", help="event type")
    p.add_argument("--data", help="event data as JSON, or @file.json")
    p.add_argument("--metadata", help="envelope metadata as a JSON object")
    p.add_argument("--idempotency-key", help="deduplicates the runs the event starts")
    p.add_argument("--run", help="deliver to this run's event waits instead of the manifest")
    _env_option(p)
    p.set_defaults(handler=cmd_send_event)

    p = sub.add_parser("signal", parents=[common], help="send a signal to a run")
    p.add_argument("run_id", metavar="RUN")
    p.add_argument("name", help="signal name")
    p.add_argument("--payload", help="payload as JSON, or @file.json")
    p.set_defaults(handler=cmd_signal)

    token = sub.add_parser("token", help="complete, fail or heartbeat a wait token")
    token_sub = token.add_subparsers(dest="token_action", metavar="ACTION", required=True)
    for action, text in (
        ("complete", "complete the token"),
        ("fail", "fail the token"),
        ("heartbeat", "push the token's heartbeat deadline"),
    ):
        p = token_sub.add_parser(action, parents=[common], help=text)
        p.add_argument(
            "run_id", metavar="RUN", nargs="?", help="not needed for ids relayflow generated"
        )
        p.add_argument("token_id", metavar="TOKEN")
        if action == "complete":
            p.add_argument("--payload", help="payload as JSON, or @file.json")
        if action == "fail":
            p.add_argument("--message", required=True, help="error message")
            p.add_argument("--code", help="error code")
        p.set_defaults(handler=cmd_token)

    manifest = sub.add_parser("manifest", help="register or show a manifest")
    manifest_sub = manifest.add_subparsers(dest="manifest_command", metavar="ACTION", required=True)
    p = manifest_sub.add_parser(
        "build", help="write an app's manifest as the body of POST /api/manifests"
    )
    p.add_argument("--app", required=True, help="module that defines the workflows")
    p.add_argument(
        "-o", "--output", default="manifest.json", help="file to write, - for stdout (%(default)s)"
    )
    _env_option(p)
    p.set_defaults(handler=cmd_manifest_build)
    p = manifest_sub.add_parser("push", parents=[common], help="register an app's manifest")
    p.add_argument("--app", required=True, help="module that defines the workflows")
    _env_option(p)
    p.set_defaults(handler=cmd_manifest_push)
    p = manifest_sub.add_parser("show", parents=[common], help="print the current manifest")
    _env_option(p)
    p.set_defaults(handler=cmd_manifest_show)

    add_schedule_commands(sub, common, _env_option)
    add_concurrency_commands(sub, common, _env_option)
    add_audit_command(sub, common, ENVIRONMENTS)
    add_versions_command(sub, common, ENVIRONMENTS)
    add_workflow_commands(sub, common, ENVIRONMENTS)

    p = sub.add_parser("dev", help="run the local stack (moto, API, scheduler)")
    _add_dev_options(p)
    p.set_defaults(handler=None)
    add_init_command(sub)
    return parser


def _add_dev_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--app",
        default=os.environ.get("RELAYFLOW_APP"),
        help="module whose workflows to host (env RELAYFLOW_APP; 'examples' when importable)",
    )
    parser.add_argument("--port", type=int, default=8787, help="API port (%(default)s)")
    parser.add_argument("--moto-port", type=int, default=5050, help="moto port (%(default)s)")
    _env_option(parser)
    parser.add_argument(
        "--token", dest="dev_token", help="dev API token (random at first, then kept)"
    )
    state = parser.add_argument_group("state (kept across restarts)")
    state.add_argument(
        "--state-dir",
        default=os.environ.get("RELAYFLOW_DEV_STATE", ".relayflow"),
        help="folder of the saved runs, alarms and manifests (env RELAYFLOW_DEV_STATE; "
        "%(default)s in the current directory)",
    )
    state.add_argument("--fresh", action="store_true", help="forget the saved state, start empty")
    state.add_argument(
        "--reload",
        action="store_true",
        help="restart the hosted workflows when the app's files change (runs carry on)",
    )
    remote = parser.add_argument_group("step host in another process")
    remote.add_argument(
        "--dispatch-url",
        help="send step requests to this step host over HTTP instead of hosting --app here",
    )
    remote.add_argument(
        "--signing-secret",
        default=os.environ.get("RELAYFLOW_SIGNING_SECRET"),
        help="secret signing those requests (env RELAYFLOW_SIGNING_SECRET)",
    )
    remote.add_argument(
        "--signing-mode",
        choices=("relayflow", "voyant"),
        default="relayflow",
        help="relayflow (timestamped) or voyant (the reference's TypeScript hosts); %(default)s",
    )
    remote.add_argument(
        "--http-checkpoints",
        action="store_true",
        help="let that host checkpoint each step through this stack's API (needs a secret)",
    )


def main(
    argv: Sequence[str] | None = None,
    *,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
) -> int:
    """Run the ``relayflow`` command; returns the exit status (0 ok, 1 refused, 2 usage)."""
    out = stdout or sys.stdout
    err = stderr or sys.stderr
    parser = build_parser()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            args = parser.parse_args(argv)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    if args.command == "init":
        return run_init(args, out=out, err=err)
    if args.command == "dev":
        from relayflow.local.cli import run_dev  # imports moto: only for this command

        dev_argv = list(sys.argv[1:] if argv is None else argv)
        return run_dev(args, out=out, err=err, argv=dev_argv)
    handler: Handler = args.handler
    try:
        url = api_base_url(args.url)
    except UsageError as exc:
        err.write(f"relayflow: error: {exc}\n")
        return EXIT_USAGE
    client = ApiClient(url=url, token=args.token or None)
    console = Console(client=client, json_output=bool(args.json), out=out, err=err)
    try:
        return handler(args, console)
    except UsageError as exc:
        err.write(f"relayflow: error: {exc}\n")
        return EXIT_USAGE
    except ApiRequestError as exc:
        if console.json_output and exc.body is not None:
            console.emit_json(exc.body)
        err.write(_refusal_line(exc) + "\n")
        return EXIT_REFUSED


def _refusal_line(exc: ApiRequestError) -> str:
    if exc.status == 0:
        return f"relayflow: {exc.message}"
    line = f"error ({exc.status}): {exc.code}: {exc.message}".removesuffix(": ")
    return f"{line}; {TOKEN_HINT}" if exc.status == 401 else line
