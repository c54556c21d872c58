"""The same workloads on the AWS durable execution SDK's local test runner, when installed.

``aws-durable-execution-sdk-python-testing`` (with ``aws-durable-execution-sdk-python``)
provides ``DurableFunctionTestRunner``, which runs a durable handler in process against an
in-memory checkpoint store with time skipping. Without the package the peer is skipped.
"""

from __future__ import annotations

import importlib
import itertools
import json
from collections.abc import Callable
from typing import Any

from bench.workloads import realistic_output

PACKAGE = "aws-durable-execution-sdk-python-testing"
_SLEEP_SECONDS = 60
_names = itertools.count(1)


def available() -> bool:
    """Whether the peer SDK and its test runner can be imported."""
    try:
        importlib.import_module("aws_durable_execution_sdk_python")
        importlib.import_module("aws_durable_execution_sdk_python_testing.runner")
    except ImportError:
        return False
    return True


def version() -> str:
    """Installed versions of the peer packages."""
    from importlib.metadata import version as of

    return (
        f"aws-durable-execution-sdk-python {of('aws-durable-execution-sdk-python')}, "
        f"{PACKAGE} {of(PACKAGE)}"
    )


def _handler() -> Callable[..., Any]:
    sdk = importlib.import_module("aws_durable_execution_sdk_python")
    config = importlib.import_module("aws_durable_execution_sdk_python.config")

    def step_of(i: int) -> Callable[[Any], Any]:
        return lambda _step_context: realistic_output(i)

    def body(event: Any, context: Any) -> Any:
        last: Any = None
        for i in range(event["steps"]):
            if i and event.get("sleeps"):
                context.wait(config.Duration.from_seconds(_SLEEP_SECONDS), name=f"sleep{i}")
            last = context.step(step_of(i), name=f"s{i}")
        return last

    handler: Callable[..., Any] = sdk.durable_execution(body)
    return handler


class PeerRunner:
    """A ``DurableFunctionTestRunner`` over the benchmark handler (close it when done)."""

    def __init__(self) -> None:
        runner_module = importlib.import_module("aws_durable_execution_sdk_python_testing.runner")
        self._runner = runner_module.DurableFunctionTestRunner(handler=_handler())

    def run(self, steps: int, *, sleeps: bool) -> str:
        """Run one execution to its end; returns its status name."""
        result = self._runner.run(
            input=json.dumps({"steps": steps, "sleeps": sleeps}),
            execution_timeout=300,
            execution_name=f"bench-{next(_names)}",
        )
        status = str(getattr(result.status, "name", result.status))
        if status != "SUCCEEDED":
            raise RuntimeError(f"peer execution ended {status}")
        return status

    def close(self) -> None:
        """Stop the runner's threads."""
        self._runner.close()
