"""Entry point of the api function: API Gateway (HTTP API, payload 2.0) calls it per request;
a run pinned to this version invokes it directly with step requests."""

from __future__ import annotations

from relayflow.api.handler import build_app_from_env, make_lambda_handler
from relayflow.deployment import deployment_driver
from relayflow.worker.hosts import serving_step_requests

lambda_handler = serving_step_requests(
    make_lambda_handler(lambda: build_app_from_env(driver=deployment_driver.get))
)
