"""The AWS wiring's documented import path; it lives in :mod:`relayflow.adapters.aws.wiring`."""

from relayflow.adapters.aws.wiring import build_aws_driver, build_dispatcher, build_dispatchers

__all__ = ["build_aws_driver", "build_dispatcher", "build_dispatchers"]
