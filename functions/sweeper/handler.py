"""The sweeper function: drives again the runs whose alarm was missed or whose invocation died.

Triggered by: an EventBridge Scheduler rate (every minute by default).
IAM grants: the drive function's.
"""

from relayflow.entrypoints.sweeper import lambda_handler

__all__ = ["lambda_handler"]
