"""The ``sweeper`` Lambda: re-drives runs whose wake time passed without an alarm."""

from relayflow.api.handler import sweeper_handler

handler = sweeper_handler
lambda_handler = sweeper_handler
