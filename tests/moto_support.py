"""moto for the test suites: fake credentials, a fresh backend, and fast DynamoDB transactions."""

from __future__ import annotations

import copy
import threading
import types
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from moto import mock_aws

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
def moto_backend() -> Iterator[None]:
    """A fresh moto backend (the boto3 session is kept for speed)."""
    with mock_aws(config={"core": {"reset_boto3_session": False}}):
        yield


def use_fast_transactions(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make moto copy a table once per transaction, and run its transactions one at a time.

    moto 5.2 deep-copies the whole table for every item of a ``TransactWriteItems`` (to roll
    back on failure), which makes long runs quadratic in tests. Transactions are also
    serialised, as DynamoDB isolates them (moto alone could interleave two of them).
    """
    import moto.dynamodb.models as models

    original = models.DynamoDBBackend.transact_write_items
    lock = threading.Lock()
    local = threading.local()

    def deepcopy(obj: Any, memo: Any = None) -> Any:
        copies: dict[int, Any] | None = getattr(local, "copies", None)
        if copies is None:
            return copy.deepcopy(obj, memo)
        if id(obj) not in copies:
            copies[id(obj)] = copy.deepcopy(obj, memo)
        return copies[id(obj)]

    def one_at_a_time(self: Any, transact_items: list[dict[str, Any]]) -> None:
        with lock:
            local.copies = {}
            try:
                original(self, transact_items)
            finally:
                local.copies = None

    monkeypatch.setattr(models, "copy", types.SimpleNamespace(deepcopy=deepcopy))
    monkeypatch.setattr(models.DynamoDBBackend, "transact_write_items", one_at_a_time)
