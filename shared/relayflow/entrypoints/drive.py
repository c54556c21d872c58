"""Entry point of the drive function: EventBridge Scheduler run alarms and schedule firings,
the alarm queue's SQS batches, and the api function's asynchronous hand-offs call it; a run
pinned to this version invokes it directly with step requests."""

from __future__ import annotations

from relayflow.deployment import deployment_driver
from relayflow.drive.handlers import make_drive_handler
from relayflow.worker.hosts import serving_step_requests

lambda_handler = serving_step_requests(make_drive_handler(deployment_driver.get))
