"""Fixtures of the AWS adapter tests: fake credentials, a region and moto per test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.moto_support import moto_backend, use_fake_credentials


@pytest.fixture(autouse=True)
def _fake_aws_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    use_fake_credentials(monkeypatch)


@pytest.fixture
def aws() -> Iterator[None]:
    """A fresh moto backend for one test."""
    with moto_backend():
        yield
