"""The ``drive`` Lambda: an alarm or hand-off ``{"runId", "wakeAt"}`` drives that run."""

from relayflow.api.handler import drive_handler

handler = drive_handler
lambda_handler = drive_handler
