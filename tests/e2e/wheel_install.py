"""relayflow as a user gets it: the built wheel, installed with an extra into a fresh virtualenv
outside this checkout.

The dependencies come from one wheelhouse, filled by pip from the package index the first
time and kept under the user cache (keyed by the declared dependencies), so later runs install
with ``--no-index``.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: The extras a user installs (``dev`` is the contributors').
USER_EXTRAS = ("testing", "local", "cdk")
PIP_TIMEOUT_S = 900


def _pip(*args: str, python: str = sys.executable) -> None:
    # This checkout's pip drives every install (`--python` picks the target environment).
    command = [sys.executable, "-m", "pip", "--disable-pip-version-check", *args]
    if python != sys.executable:
        command[3:3] = ["--python", python]
    result = subprocess.run(
        command, capture_output=True, text=True, check=False, timeout=PIP_TIMEOUT_S
    )
    assert result.returncode == 0, f"{' '.join(command)}:\n{result.stdout}\n{result.stderr}"


def build_wheel(outdir: Path) -> Path:
    """Build relayflow's wheel from a copy of the sources (no build files in the checkout)."""
    source = outdir / "source"
    source.mkdir(parents=True)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, source / name)
    shutil.copytree(
        ROOT / "shared" / "relayflow",
        source / "shared" / "relayflow",
        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"),
    )
    _pip("wheel", "--quiet", "--no-deps", "--wheel-dir", str(outdir), str(source))
    (wheel,) = outdir.glob("relayflow-*.whl")
    return wheel


def _cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "relayflow-tests"


def wheelhouse_key() -> str:
    """A hash of what the user extras install: it changes when a dependency does."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = [*project["dependencies"]]
    for extra in USER_EXTRAS:
        declared += project["optional-dependencies"][extra]
    text = "\n".join(sorted(declared)) + f"\npy{sys.version_info[0]}.{sys.version_info[1]}"
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def wheelhouse(wheel: Path) -> Path:
    """The folder of every wheel the user extras need, filled once (one process at a time)."""
    folder = _cache_root() / f"wheelhouse-{wheelhouse_key()}"
    with _locked(_cache_root() / f".wheelhouse-{wheelhouse_key()}.lock"):
        if not (folder / ".complete").is_file():
            shutil.rmtree(folder, ignore_errors=True)
            extras = ",".join(USER_EXTRAS)
            _pip("wheel", "--quiet", "--wheel-dir", str(folder), f"{wheel}[{extras}]")
            for own in folder.glob("relayflow-*.whl"):
                own.unlink()  # each test installs the wheel it built
            (folder / ".complete").write_text("")
    return folder


def install(wheel: Path, extra: str, venv: Path, wheels: Path) -> Path:
    """A fresh virtualenv with ``relayflow[extra]`` from ``wheel``; returns its ``bin``."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    _pip(
        "install", "--quiet", "--no-compile", "--no-index", "--find-links", str(wheels),
        f"{wheel}[{extra}]", python=python,
    )  # fmt: skip
    return venv / "bin"


def user_env() -> dict[str, str]:
    """The environment of a user's shell: nothing of this checkout or its virtualenv."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("RELAYFLOW_", "PYTEST", "VIRTUAL_ENV", "COV_"))
        and k not in ("PYTHONPATH", "PYTHONHOME")
    }
    env["PYTHONUNBUFFERED"] = "1"
    return env
