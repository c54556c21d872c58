"""Entry point of the worker function: the Lambda dispatcher invokes it with step requests;
it hosts the workflow bodies named by ``RELAYFLOW_WORKFLOW_MODULES``."""

from __future__ import annotations

from relayflow.worker.hosts import lambda_handler

__all__ = ["lambda_handler"]
