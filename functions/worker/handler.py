"""The ``worker`` Lambda: the step host of the example workflows (importing them registers them)."""

import examples  # noqa: F401
from relayflow.worker.hosts import lambda_handler

handler = lambda_handler
