"""The sample CDK app: `python3 infra/app.py` (or `cdk synth -c stage=dev`) synthesises offline.

One stack hosting the `examples` workflows inline; stage settings come from CDK context.
Every AwsSolutions (cdk-nag) finding fails the synth unless it was acknowledged with a reason.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

_ROOT = Path(__file__).resolve().parents[1]
# `python3 infra/app.py` puts infra/ first on sys.path; the project root and the package
# source must be importable too, even where relayflow is not installed.
for _path in (str(_ROOT / "shared"), str(_ROOT)):
    if _path not in sys.path:
        sys.path.insert(0, _path)

from aws_cdk import App, Validations  # noqa: E402
from cdk_nag import AwsSolutionsChecks  # noqa: E402

from infra.stack import RelayflowStack, stack_for_stage, stage_settings  # noqa: E402
from relayflow.cdk import BundleError  # noqa: E402

__all__ = ["build_app", "cdk_json_context", "command_line_context", "main"]


def cdk_json_context() -> dict[str, Any]:
    """The `context` of `cdk.json`, which the CDK CLI would otherwise pass in.

    Empty when the CLI runs the app (it already passed the context) or there is no cdk.json.
    """
    if "CDK_CONTEXT_JSON" in os.environ or "CDK_OUTDIR" in os.environ:
        return {}
    path = _ROOT / "cdk.json"
    if not path.is_file():
        return {}
    context = json.loads(path.read_text()).get("context", {})
    return dict(context) if isinstance(context, dict) else {}


def build_app(
    context: Mapping[str, Any] | None = None, outdir: str | None = None, *, nag: bool = True
) -> tuple[App, RelayflowStack]:
    """Build the sample app and its one stack (not yet synthesised).

    `context` is laid over the `cdk.json` context, so `{"stage": "prod"}` picks that stage.
    """
    app = App(context={**cdk_json_context(), **(context or {})}, outdir=outdir)
    stack = stack_for_stage(app, stage_settings(app))
    if nag:
        Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    return app, stack


def command_line_context(argv: Sequence[str]) -> dict[str, str]:
    """`-c key=value` / `--context key=value` pairs, as the CDK CLI accepts them."""
    context: dict[str, str] = {}
    args = iter(argv)
    for arg in args:
        if arg in ("-c", "--context"):
            pair = next(args, "")
        elif arg.startswith("--context="):
            pair = arg.split("=", 1)[1]
        else:
            raise SystemExit(f"usage: python3 infra/app.py [-c key=value ...]; got {arg!r}")
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise SystemExit(f"context must be key=value, got {pair!r}")
        context[key] = value
    return context


def main(argv: Sequence[str] | None = None) -> None:
    """Synthesise the sample app into `cdk.out` (or the outdir the CDK CLI chose).

    Run directly, it accepts the CLI's `-c key=value` flags (`python3 infra/app.py -c
    stage=prod`).
    """
    context = command_line_context(sys.argv[1:] if argv is None else argv)
    outdir = os.environ.get("CDK_OUTDIR") or str(_ROOT / "cdk.out")
    try:
        app, _ = build_app(context, outdir=outdir)
    except BundleError as exc:
        raise SystemExit(f"relayflow: {exc}") from None
    app.synth()


if __name__ == "__main__":
    main()
