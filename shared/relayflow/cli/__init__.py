"""The ``relayflow`` command: talk to any relayflow deployment over HTTP, or run it locally."""

from relayflow.cli.app import build_parser, main
from relayflow.cli.client import ApiClient, ApiError

__all__ = ["ApiClient", "ApiError", "build_parser", "main"]
