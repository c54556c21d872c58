"""``relayflow dev`` where it cannot run (no fcntl, no local extra) says so in one line."""

from __future__ import annotations

import io
import sys

import pytest

from relayflow.cli import main


@pytest.mark.parametrize("extra", [[], ["--reload"]])
def test_dev_without_fcntl_fails_with_one_line(
    monkeypatch: pytest.MonkeyPatch, extra: list[str]
) -> None:
    monkeypatch.setitem(sys.modules, "fcntl", None)  # what Windows' Python has: no fcntl
    out, err = io.StringIO(), io.StringIO()
    status = main(["dev", "--app", "examples", *extra], stdout=out, stderr=err)
    assert status == 2
    assert out.getvalue() == ""
    assert err.getvalue() == (
        "relayflow dev runs on Linux and macOS, not natively on Windows (it locks its state "
        "folder with fcntl): run it in WSL\n"
    )


def test_dev_without_the_local_extra_says_which_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "waitress", None)
    monkeypatch.setitem(sys.modules, "watchfiles", None)
    out, err = io.StringIO(), io.StringIO()
    status = main(["dev", "--app", "examples"], stdout=out, stderr=err)
    assert status == 2 and out.getvalue() == ""
    assert err.getvalue() == (
        "relayflow dev needs the local extra (waitress, watchfiles missing): "
        "pip install 'relayflow[local]'\n"
    )
