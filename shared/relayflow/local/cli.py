"""``relayflow dev``: start the local stack, print how to use it, run until Ctrl-C."""

from __future__ import annotations

import argparse
import gc
import importlib.util
import json
import logging
import os
import shlex
import signal
import threading
from pathlib import Path
from types import FrameType
from typing import Any, TextIO
from urllib.parse import quote

from relayflow.cli.app_loader import AppLoadError, put_working_directory_on_path

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
DEFAULT_APP = "examples"
#: A sample input per example workflow (those of ``examples`` and of the project ``relayflow
#: init`` writes), so the printed curl commands work as they are.
SAMPLE_INPUTS: dict[str, Any] = {
    "media.thumbnails": {"gallery": "g-1", "images": ["a.jpg", "b.png", "notes.txt", "c.jpg"]},
    "orders.fulfil": {"id": "o-1", "total": 42, "items": ["book"]},
    "orders.process": {"id": "o-1", "items": ["book"]},
}


#: Why ``relayflow dev`` cannot run here, said in one line instead of an ImportError.
UNSUPPORTED_PLATFORM = (
    "relayflow dev runs on Linux and macOS, not natively on Windows (it locks its state "
    "folder with fcntl): run it in WSL"
)


#: What the ``local`` extra brings that ``relayflow dev`` imports (moto's server runs on flask).
LOCAL_EXTRA_MODULES = ("moto", "flask", "waitress", "watchfiles")


def missing_local_modules() -> list[str]:
    """The modules of the ``local`` extra that are not installed."""
    return [name for name in LOCAL_EXTRA_MODULES if importlib.util.find_spec(name) is None]


def platform_supported() -> bool:
    """Whether this platform has what the local stack needs (POSIX file locks)."""
    return importlib.util.find_spec("fcntl") is not None


def resolve_app(requested: str | None) -> str | None:
    """The app module to host: the one asked for, else ``examples`` when importable."""
    if requested:
        return requested
    put_working_directory_on_path()
    return DEFAULT_APP if importlib.util.find_spec(DEFAULT_APP) is not None else None


def sample_trigger(workflow_ids: list[str]) -> tuple[str, Any] | None:
    """A workflow to show in the trigger example, with an input it accepts."""
    for workflow_id, sample in SAMPLE_INPUTS.items():
        if workflow_id in workflow_ids:
            return workflow_id, sample
    if workflow_ids:
        return workflow_ids[0], {}
    return None


def dashboard_link(url: str, token: str) -> str:
    """The dashboard's address signed in with ``token`` (in the fragment: never sent)."""
    return f"{url}/#token={quote(token, safe='')}"


def banner(url: str, token: str, moto_url: str, environment: str, app: Any, notes: str = "") -> str:
    """What ``relayflow dev`` prints once the stack is up (``notes``: lines after the app)."""
    auth = shlex.quote(f"Authorization: Bearer {token}")
    lines = [
        "relayflow dev: the local stack is running",
        "",
        f"  API          {url}",
        f"  dashboard    {dashboard_link(url, token)}",
        f"  token        {token}",
        f"  moto         {moto_url}",
        f"  environment  {environment}",
    ]
    if app.module and not app.workflow_ids:
        lines.append(
            f"  app          {app.module}: no workflows registered (declare them with "
            f"@workflow(id=...) in {app.module} or a module it imports)"
        )
    elif app.module:
        lines.append(
            f"  app          {app.module}: {len(app.workflow_ids)} workflow(s), "
            f"{app.filter_count} event filter(s), manifest {app.manifest_version}"
        )
    else:
        lines.append("  app          none (pass --app MODULE to host your workflows)")
    if notes:
        lines.append(notes)
    lines += ["", "Try:", f"  curl -s {url}/api/healthz"]
    sample = sample_trigger(app.workflow_ids)
    if sample is not None:
        body = json.dumps({"workflowId": sample[0], "input": sample[1], "waitMs": 5000})
        lines.append(
            f"  curl -s -X POST {url}/api/runs -H {auth} "
            f"-H 'Content-Type: application/json' -d {shlex.quote(body)}"
        )
    lines.append(f"  curl -s -H {auth} '{url}/api/runs?limit=5'")
    lines += [
        "",
        "Or with the CLI:",
        f"  export RELAYFLOW_URL={url} RELAYFLOW_TOKEN={token}",
        "  relayflow runs list",
        "",
        "Run transitions are logged below. Ctrl-C stops.",
        "",
    ]
    return "\n".join(lines)


def state_line(stack: Any, options: Any) -> str:
    """What the banner says about the saved state and where steps run."""
    lines = []
    if options.state_dir is not None:
        what = (
            f"restored from {options.state_dir}"
            if stack.restored
            else f"empty, saved to {options.state_dir}"
        )
        lines.append(f"  state        {what} (--fresh starts empty)")
    if options.dispatch_url:
        lines.append(f"  step host    {options.dispatch_url} (signing: {options.signing_mode})")
        if options.http_checkpoints:
            lines.append("  checkpoints  per step, through this stack's API")
    return "\n".join(lines)


def run_dev(
    args: argparse.Namespace, *, out: TextIO, err: TextIO, argv: list[str] | None = None
) -> int:
    """Run the stack until SIGINT/SIGTERM; returns the exit status.

    With ``--reload``, the stack runs in a child process that is restarted whenever the app's
    files change; ``argv`` is the command line to start it with.
    """
    if not platform_supported():
        err.write(f"{UNSUPPORTED_PLATFORM}\n")
        return EXIT_USAGE
    missing = missing_local_modules()
    if missing:
        err.write(
            f"relayflow dev needs the local extra ({', '.join(missing)} missing): "
            "pip install 'relayflow[local]'\n"
        )
        return EXIT_USAGE
    if getattr(args, "reload", False):
        from relayflow.local.reload import supervise

        return supervise(argv or [], app=resolve_app(args.app), out=out, err=err)
    # Powertools loggers read their level when built: keep request/alarm logs off the console.
    os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "WARNING")
    os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")
    logging.getLogger("relayflow").setLevel(logging.WARNING)

    from relayflow.local.http_adapter import PortInUseError
    from relayflow.local.stack import DevOptions, DevStack, console_writer
    from relayflow.local.state import StateError

    if args.http_checkpoints and not (args.dispatch_url and args.signing_secret):
        err.write("relayflow dev: --http-checkpoints needs --dispatch-url and --signing-secret\n")
        return EXIT_USAGE
    options = DevOptions(
        app=resolve_app(args.app),
        port=args.port,
        moto_port=args.moto_port,
        environment=args.env,
        token=args.dev_token,
        state_dir=Path(args.state_dir).resolve(),
        fresh=args.fresh,
        dispatch_url=args.dispatch_url,
        signing_secret=args.signing_secret,
        signing_mode=args.signing_mode,
        http_checkpoints=args.http_checkpoints,
    )
    stack = DevStack(options, console_writer(out))
    stopped = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stopped.set()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        try:
            stack.start()
        except PortInUseError as exc:
            err.write(f"relayflow dev: {exc.strerror}; pick another with --port/--moto-port\n")
            return EXIT_USAGE
        except (AppLoadError, StateError) as exc:
            err.write(f"relayflow dev: {exc}\n")
            return EXIT_USAGE
        except Exception as exc:
            err.write(f"relayflow dev: the local stack failed to start: {exc}\n")
            return EXIT_FAILED
        # What the stack loaded to start (moto's and botocore's models, the app) lives as
        # long as the process: kept out of full collections, which would otherwise walk those
        # hundreds of thousands of objects and pause every request for a fifth of a second.
        gc.collect()
        gc.freeze()
        notes = state_line(stack, options)
        out.write(
            banner(stack.url, stack.token, stack.moto_url, options.environment, stack.app, notes)
        )
        out.write("\n")
        out.flush()
        while not stopped.wait(0.5):
            pass
        out.write("relayflow dev: stopping\n")
        out.flush()
        return EXIT_OK
    finally:
        stack.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
