"""Entry point of the sweeper function: an EventBridge Scheduler rate calls it to drive again runs
whose alarm was missed or whose invocation died."""

from __future__ import annotations

from relayflow.deployment import deployment_driver
from relayflow.drive.handlers import make_sweeper_handler

lambda_handler = make_sweeper_handler(deployment_driver.get)
