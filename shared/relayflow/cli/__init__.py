"""The ``relayflow`` command: talk to any relayflow deployment over HTTP, or run it locally."""

from typing import Any

from relayflow.cli import client
from relayflow.cli.app import build_parser, main
from relayflow.cli.client import ApiClient, ApiRequestError

__all__ = ["ApiClient", "ApiRequestError", "build_parser", "main"]


def __getattr__(name: str) -> Any:
    """``ApiError``: the deprecated alias of :class:`ApiRequestError` (with a warning)."""
    if name == "ApiError":
        return client.__getattr__(name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
