"""Entry point of the drive function: EventBridge Scheduler run alarms and schedule firings,
the alarm queue's SQS batches, and the api function's asynchronous hand-offs call it."""

from __future__ import annotations

from relayflow.deployment import deployment_driver
from relayflow.drive.handlers import make_drive_handler

lambda_handler = make_drive_handler(deployment_driver.get)
