"""The ``api`` Lambda: API Gateway HTTP API events -> the relayflow HTTP API."""

from relayflow.api.handler import lambda_handler

handler = lambda_handler
