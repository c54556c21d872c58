"""Fixtures of the CLI tests: a scripted API on 127.0.0.1."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from cli_fake_api import FakeApi, serve_fake_api


@pytest.fixture
def fake_api() -> Iterator[FakeApi]:
    with serve_fake_api() as api:
        yield api
