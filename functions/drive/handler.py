"""The drive function: advances runs when their alarm fires or the api hands one off.

Triggered by: EventBridge Scheduler (run alarms and recurring schedule firings), the alarm
queue's SQS event source mapping (short waits), and asynchronous invokes from the api function.
IAM grants: the api function's, without the token secret.
"""

from relayflow.entrypoints.drive import lambda_handler

__all__ = ["lambda_handler"]
