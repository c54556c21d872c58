"""moto for the test suites: fake credentials and a fresh, atomic backend (see
``relayflow.testing.aws``)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from relayflow.testing.aws import mock_aws

REGION = "eu-west-1"


def use_fake_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    """No test may ever reach real AWS: credentials are fake and the region is fixed."""
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SECURITY_TOKEN"):
        monkeypatch.setenv(name, "testing")
    monkeypatch.setenv("AWS_SESSION_TOKEN", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)


@contextmanager
def moto_backend(*, gsi_lag: int = 0, unprocessed_items: int = 0) -> Iterator[None]:
    """A fresh atomic moto backend (the boto3 session is kept for speed)."""
    with mock_aws(
        config={"core": {"reset_boto3_session": False}},
        region=REGION,
        gsi_lag=gsi_lag,
        unprocessed_items=unprocessed_items,
    ):
        yield
