"""Runs ``relayflow dev`` as a subprocess on free ports and follows its console output."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import requests

ROOT = Path(__file__).resolve().parents[2]
READY_TIMEOUT_S = 90.0


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def cli_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "relayflow.cli", *args]


def console_script_command(*args: str) -> list[str]:
    """The installed ``relayflow`` script: unlike ``python -m``, it does not put the current
    directory on ``sys.path`` by itself."""
    return [str(Path(sys.executable).parent / "relayflow"), *args]


def child_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RELAYFLOW_")}
    env["PYTHONUNBUFFERED"] = "1"
    # Each stack saves its state in a folder of its own, never in the checkout.
    env["RELAYFLOW_DEV_STATE"] = tempfile.mkdtemp(prefix="relayflow-dev-state-")
    env.update(extra)
    return env


@dataclass
class DevProcess:
    """A running ``relayflow dev`` and the lines it printed so far."""

    process: subprocess.Popen[str]
    url: str
    lines: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def output(self) -> str:
        return "\n".join(self.lines)

    def wait_for_output(self, predicate: Callable[[str], bool], timeout_s: float) -> str:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for line in list(self.lines):
                if predicate(line):
                    return line
            if self.process.poll() is not None:
                break
            time.sleep(0.05)
        raise AssertionError(
            f"no matching line within {timeout_s}s; output:\n{self.output()}\n"
            f"stderr:\n{chr(10).join(self.errors)}"
        )

    def interrupt(self, timeout_s: float = 15.0) -> int:
        self.process.send_signal(signal.SIGINT)
        return self.process.wait(timeout=timeout_s)

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)


def _pump(stream: object, into: list[str]) -> None:
    for line in stream:  # type: ignore[attr-defined]
        into.append(line.rstrip("\n"))


def start_dev(
    *extra: str,
    state_dir: Path | None = None,
    app: str = "examples",
    cwd: Path = ROOT,
    console_script: bool = False,
    environment: Mapping[str, str] | None = None,
) -> DevProcess:
    port, moto_port = free_port(), free_port()
    env = child_env(**({"RELAYFLOW_DEV_STATE": str(state_dir)} if state_dir else {}))
    env.update(environment or {})
    command = console_script_command if console_script else cli_command
    process = subprocess.Popen(
        command("dev", "--app", app, "--port", str(port), "--moto-port", str(moto_port), *extra),
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    dev = DevProcess(process=process, url=f"http://127.0.0.1:{port}")
    threading.Thread(target=_pump, args=(process.stdout, dev.lines), daemon=True).start()
    threading.Thread(target=_pump, args=(process.stderr, dev.errors), daemon=True).start()
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(
                f"relayflow dev exited with {process.returncode}:\n{dev.output()}\n"
                + "\n".join(dev.errors)
            )
        if any("Ctrl-C stops" in line for line in dev.lines):
            try:
                if requests.get(f"{dev.url}/api/healthz", timeout=2).status_code == 200:
                    return dev
            except requests.ConnectionError:
                pass
        time.sleep(0.1)
    dev.kill()
    raise AssertionError(f"relayflow dev not ready in {READY_TIMEOUT_S}s:\n{dev.output()}")


def get_run(url: str, run_id: str, headers: dict[str, str]) -> dict[str, Any]:
    """``GET /api/runs/{id}``, which must answer 200."""
    answer = requests.get(f"{url}/api/runs/{run_id}", headers=headers, timeout=10)
    assert answer.status_code == 200, answer.text
    run: dict[str, Any] = answer.json()
    return run


def wait_until_completed(
    url: str, run_id: str, headers: dict[str, str], timeout_s: float = 60.0
) -> dict[str, Any]:
    """The run once completed; fails at once if it ends otherwise."""
    deadline = time.monotonic() + timeout_s
    run = get_run(url, run_id, headers)
    while run["status"] != "completed":
        assert run["status"] in ("running", "waiting"), run
        assert time.monotonic() < deadline, run
        time.sleep(0.1)
        run = get_run(url, run_id, headers)
    return run
