"""Fixtures of the end-to-end tests: one ``relayflow dev`` per test module."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from dev_process import DevProcess, start_dev


@pytest.fixture(scope="module")
def dev_stack() -> Iterator[DevProcess]:
    dev = start_dev("--token", "e2e-token")
    try:
        yield dev
    finally:
        try:
            dev.interrupt()
        finally:
            dev.kill()
