"""Without a browser the dashboard tests fail with one line saying how to install it."""

from __future__ import annotations

from pathlib import Path

import pytest
from browser import INSTALL_HINT, chromium_path


def test_no_browser_fails_with_the_install_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("RELAYFLOW_CHROMIUM", raising=False)

    with pytest.raises(pytest.fail.Exception) as failure:
        chromium_path()

    assert str(failure.value) == INSTALL_HINT
    assert "\n" not in INSTALL_HINT and "apt-get install -y chromium" in INSTALL_HINT


def test_a_configured_browser_is_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    binary = tmp_path / "my-chromium"
    binary.write_text("")
    monkeypatch.setenv("RELAYFLOW_CHROMIUM", str(binary))
    assert chromium_path() == str(binary)
    monkeypatch.setenv("RELAYFLOW_CHROMIUM", str(tmp_path / "missing"))
    with pytest.raises(pytest.fail.Exception, match="does not exist"):
        chromium_path()
