"""``relayflow manifest build|push|show``: write, register or print an app's manifest."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from relayflow.cli.app_loader import AppLoadError, build_app_manifest, load_app
from relayflow.cli.commands import EXIT_OK, Console
from relayflow.cli.render import compact_json, format_time, pick
from relayflow.cli.values import UsageError


def cmd_manifest_build(args: argparse.Namespace, con: Console) -> int:
    """Import ``--app`` and write the body of ``POST /api/manifests`` for ``--env``.

    The file holds ``{"environment", "manifest"}``, so ``curl -d @manifest.json`` (or
    ``-d "$(cat manifest.json)"``) registers it as it is.
    """
    try:
        load_app(args.app)
    except AppLoadError as exc:
        raise UsageError(str(exc)) from exc
    manifest = build_app_manifest(args.env)
    text = json.dumps({"environment": args.env, "manifest": manifest}, indent=2, sort_keys=True)
    if args.output == "-":
        con.out.write(text + "\n")
        return EXIT_OK
    path = Path(args.output)
    try:
        path.write_text(text + "\n")
    except OSError as exc:
        raise UsageError(f"cannot write {path}: {exc.strerror}") from exc
    workflows = manifest.get("workflows", [])
    filters = manifest.get("eventFilters", [])
    con.err.write(
        f"wrote {path}: manifest {manifest.get('versionId')} for {args.env}, "
        f"{len(workflows)} workflow(s), {len(filters)} event filter(s)\n"
    )
    return EXIT_OK


def cmd_manifest_push(args: argparse.Namespace, con: Console) -> int:
    """Import ``--app``, build its manifest for ``--env`` and register it."""
    try:
        load_app(args.app)
    except AppLoadError as exc:
        raise UsageError(str(exc)) from exc
    manifest = build_app_manifest(args.env)
    answer = con.client.push_manifest(args.env, manifest)
    if con.json_output:
        con.emit_json(answer)
        return EXIT_OK
    workflows = manifest.get("workflows", [])
    filters = manifest.get("eventFilters", [])
    version = pick(answer, "versionId", default=manifest.get("versionId"))
    con.line(
        f"registered manifest {version} for {args.env}: "
        f"{len(workflows)} workflow(s), {len(filters)} event filter(s)"
    )
    return EXIT_OK


def cmd_manifest_show(args: argparse.Namespace, con: Console) -> int:
    """Print the environment's current manifest."""
    answer = con.client.get_manifest(args.env)
    if con.json_output:
        con.emit_json(answer)
        return EXIT_OK
    manifest = answer.get("manifest", answer)
    if not isinstance(manifest, dict):
        manifest = {}
    con.line(f"environment  {answer.get('environment', args.env)}")
    con.line(f"version      {pick(answer, 'versionId', default=manifest.get('versionId', '?'))}")
    if manifest.get("builtAt"):
        con.line(f"built        {format_time(manifest['builtAt'])} UTC")
    registered = pick(answer, "registeredAt", "createdAt", "updatedAt")
    if registered is not None:
        con.line(f"registered   {format_time(registered)} UTC")
    con.line("workflows:")
    for wf in manifest.get("workflows", []):
        if isinstance(wf, dict):
            con.line(f"  {wf.get('id', '?')}  ({wf.get('version', 'v1')})")
    con.line("event filters:")
    for flt in manifest.get("eventFilters", []):
        if isinstance(flt, dict):
            where = flt.get("where")
            suffix = f"  where {compact_json(where, 80)}" if where else ""
            con.line(
                f"  {flt.get('id', '?')}  {flt.get('eventType', '?')} -> "
                f"{flt.get('targetWorkflowId', '?')}{suffix}"
            )
    return EXIT_OK
