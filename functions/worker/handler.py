"""The ``worker`` Lambda: a step host for the workflows of ``RELAYFLOW_WORKFLOW_MODULES``."""

from relayflow.worker.hosts import lambda_handler

handler = lambda_handler
