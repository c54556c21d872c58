"""Fixtures of the reliability tests (fake AWS credentials, a moto deployment) and the totals
printed at the end of a session that ran them (gathered from xdist workers too)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import botocore.endpoint
import pytest
from fault_injection import RecordingSleep
from reliability_cluster import Cluster
from reliability_summary import (
    pytest_sessionfinish,
    pytest_terminal_summary,
    pytest_testnodedown,
)

from tests.moto_support import moto_backend, use_fake_credentials

__all__ = ["pytest_sessionfinish", "pytest_terminal_summary", "pytest_testnodedown"]


@pytest.fixture(autouse=True)
def _fake_aws_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    use_fake_credentials(monkeypatch)


@pytest.fixture(scope="module")
def cluster_backend() -> Iterator[None]:
    """One moto backend per module (creating tables per test would dominate the time)."""
    with pytest.MonkeyPatch.context() as patch:
        use_fake_credentials(patch)
        with moto_backend():
            yield


@pytest.fixture(scope="module")
def module_cluster(cluster_backend: None) -> Cluster:
    """A warm deployment on moto shared by a module's tests (reset between scenarios)."""
    return Cluster()


@pytest.fixture
def cluster(module_cluster: Cluster) -> Iterator[Cluster]:
    """The module's deployment, emptied before each test."""
    module_cluster.reset()
    yield module_cluster
    module_cluster.reset()


class _FakeTime:
    """botocore's ``time`` module with a sleep that only records (no real waiting)."""

    def __init__(self, sleep: RecordingSleep) -> None:
        self.sleep = sleep

    def __getattr__(self, name: str) -> Any:
        import time

        return getattr(time, name)


@pytest.fixture
def backoff(monkeypatch: pytest.MonkeyPatch) -> RecordingSleep:
    """The delays botocore's retry loop waited (recorded, not slept)."""
    sleep = RecordingSleep()
    monkeypatch.setattr(botocore.endpoint, "time", _FakeTime(sleep))
    return sleep
