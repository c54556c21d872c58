"""pytest hooks that print the reliability totals at the end of a session, also under xdist
(workers hand their totals to the controller). Registered by ``tests/reliability/conftest.py``;
a conftest higher up may import them too so ``pytest -n auto tests`` prints them."""

from __future__ import annotations

from typing import Any

import pytest
import reliability_tally
from reliability_figures import totals_path, write_totals

_WORKER_KEY = "relayflow_reliability_tally"
_by_worker: dict[str, dict[str, int]] = {}
_printed: list[bool] = []


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Hand this worker's totals to the xdist controller (no-op without xdist)."""
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:
        workeroutput[_WORKER_KEY] = reliability_tally.snapshot()


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:
    """Keep a finished xdist worker's totals (once per worker, however often called)."""
    figures = getattr(node, "workeroutput", {}).get(_WORKER_KEY)
    if figures:
        worker = str(getattr(getattr(node, "gateway", None), "id", id(node)))
        _by_worker[worker] = {name: int(value) for name, value in figures.items()}


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: Any) -> None:
    """Print the reliability totals once, when reliability tests ran in this session."""
    if _printed:
        return
    for figures in _by_worker.values():
        for name, value in figures.items():
            if value:
                reliability_tally.add(name, value)
    _by_worker.clear()
    if not reliability_tally.used():
        return
    _printed.append(True)
    terminalreporter.write_sep("=", "reliability")
    for line in reliability_tally.summary_lines():
        terminalreporter.write_line(line)
    path = totals_path(config)
    if path is not None:
        write_totals(path, reliability_tally.snapshot(), full=reliability_tally.FULL_SWEEP)
        terminalreporter.write_line(f"  totals written to {path}")
