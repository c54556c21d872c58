"""Entry point of the api function: API Gateway (HTTP API, payload 2.0) calls it per request."""

from __future__ import annotations

from relayflow.api.handler import build_app_from_env, make_lambda_handler
from relayflow.deployment import deployment_driver

lambda_handler = make_lambda_handler(lambda: build_app_from_env(driver=deployment_driver.get))
