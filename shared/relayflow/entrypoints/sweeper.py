"""Entry point of the sweeper function: an EventBridge Scheduler rate calls it to drive again runs
whose alarm was missed or whose invocation died, after deleting the deployment's old Lambda
versions no run needs any more; a run pinned to this version invokes it directly with step
requests."""

from __future__ import annotations

from relayflow.deployment import clean_function_versions, deployment_driver
from relayflow.drive.handlers import make_sweeper_handler
from relayflow.worker.hosts import serving_step_requests

lambda_handler = serving_step_requests(
    make_sweeper_handler(deployment_driver.get, clean_versions=clean_function_versions)
)
