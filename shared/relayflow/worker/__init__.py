"""The step host: the entry point the orchestrator (inline, Lambda or HTTP) calls."""

from relayflow.sdk.invocation import ExecutorOptions
from relayflow.worker.handler import handle_step_request

__all__ = ["ExecutorOptions", "handle_step_request"]
