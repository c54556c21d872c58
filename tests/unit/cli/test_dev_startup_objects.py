"""``relayflow dev`` keeps what it loaded to start out of the garbage collector's full
collections (moto's and botocore's models would make each one a pause of every request)."""

from __future__ import annotations

import argparse
import gc
import io
import logging
import os
import signal
import threading
from typing import Any

import pytest

import relayflow.local.stack as stack_module
from relayflow.local import cli
from relayflow.local.stack import AppInfo


class StartedStack:
    """A stack that starts at once; what was frozen is noted when it starts and stops."""

    frozen_at_start = -1
    frozen_at_stop = -1

    def __init__(self, options: Any, log: Any) -> None:
        self.url, self.token, self.moto_url = "http://127.0.0.1:1", "tok", "http://127.0.0.1:2"
        self.app, self.restored = AppInfo(None), False

    def start(self) -> None:
        StartedStack.frozen_at_start = gc.get_freeze_count()

    def stop(self) -> None:
        StartedStack.frozen_at_stop = gc.get_freeze_count()


def test_the_objects_loaded_at_start_are_frozen_once_the_stack_runs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(stack_module, "DevStack", StartedStack)
    # run_dev quiets the process's logs for the console: later tests must not inherit that.
    for name in ("POWERTOOLS_LOG_LEVEL", "POWERTOOLS_METRICS_DISABLED"):
        monkeypatch.setenv(name, "")
        monkeypatch.delenv(name)
    relayflow_logger = logging.getLogger("relayflow")
    level = relayflow_logger.level
    args = argparse.Namespace(
        reload=False, http_checkpoints=False, dispatch_url=None, signing_secret=None,
        app=None, port=0, moto_port=0, env="development", dev_token=None, state_dir=".",
        fresh=False, signing_mode="relayflow",
    )  # fmt: skip
    gc.unfreeze()
    stop = threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT))
    stop.start()
    try:
        assert cli.run_dev(args, out=io.StringIO(), err=io.StringIO()) == 0
    finally:
        stop.cancel()
        gc.unfreeze()
        relayflow_logger.setLevel(level)
    assert StartedStack.frozen_at_start == 0
    assert StartedStack.frozen_at_stop > 10_000
