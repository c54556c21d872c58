"""Earlier builds of the app, kept so that ``relayflow dev`` runs a pinned run on its own code.

Each start of the stack copies the app's code (what ``--reload`` watches) to
``<state folder>/builds/<build id>/``. A run of a ``pinned`` workflow that started on an
earlier build is answered ``version_unavailable`` by the stack's own host; the stack then runs
that invocation in a child process on the archived copy (:mod:`relayflow.local.archived_host`),
as a deployment would invoke the Lambda version the run started on. Runs of ``upgrade``
workflows move to the current code. A build no live run is pinned to is removed at the next
start.

The archived host has the app's code and nothing the stack gives in-process: no
``ctx.services``, and its steps become durable with its answer (per invocation).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Collection
from pathlib import Path
from typing import Any, get_args

from relayflow.core.record import TERMINAL_STATUSES, RunStatus
from relayflow.local.reload import watched_code
from relayflow.ports import Dispatcher, DispatcherResolver, InProcessDispatcher, RunQuery, RunStore
from relayflow.protocol import VERSION_UNAVAILABLE
from relayflow.worker.builds import BUILD_ID_ENV

__all__ = ["ArchivedBuildDispatcher", "CodeArchive", "archived", "live_builds"]

_FOLDER = "builds"
_STATUSES: tuple[str, ...] = get_args(RunStatus)
#: The longest one invocation of an archived build may take (a drive's budget).
_INVOCATION_TIMEOUT_S = 900


class CodeArchive:
    """The copies of the app's code by build id, under ``<state folder>/builds``.

    Args:
        state_folder: The dev stack's state folder.
        app: The ``--app`` module.
    """

    def __init__(self, state_folder: Path, app: str) -> None:
        self.root = state_folder / _FOLDER
        self.app = app

    def keep(self, build: str) -> None:
        """Copy the app's code as it is now under ``build`` (replacing an earlier copy)."""
        code = watched_code(self.app)
        if code is None:
            return
        target = self.root / build
        staging = self.root / f".{build}.partial"
        shutil.rmtree(staging, ignore_errors=True)
        for folder in code.folders:
            if code.recursive:
                shutil.copytree(
                    folder,
                    staging / folder.name,
                    ignore=shutil.ignore_patterns("__pycache__", ".*"),
                    dirs_exist_ok=True,
                )
            else:
                staging.mkdir(parents=True, exist_ok=True)
                for module in folder.glob("*.py"):
                    shutil.copy2(module, staging / module.name)
        shutil.rmtree(target, ignore_errors=True)
        staging.rename(target)

    def folder_of(self, build: str) -> Path | None:
        """The archived copy of ``build``, if there is one."""
        folder = self.root / build
        return folder if build and "/" not in build and folder.is_dir() else None

    def prune(self, keep: Collection[str]) -> list[str]:
        """Remove the builds not in ``keep``; returns the ones removed."""
        if not self.root.is_dir():
            return []
        removed = []
        for folder in self.root.iterdir():
            if folder.is_dir() and folder.name not in keep:
                shutil.rmtree(folder, ignore_errors=True)
                removed.append(folder.name)
        return sorted(removed)

    def run(self, build: str, request: dict[str, Any]) -> tuple[int, Any] | None:
        """Answer ``request`` with the archived code of ``build`` in a child process; None
        when that build is not archived."""
        folder = self.folder_of(build)
        if folder is None:
            return None
        env = {**os.environ, BUILD_ID_ENV: build}
        child = subprocess.run(
            [sys.executable, "-m", "relayflow.local.archived_host", self.app],
            input=json.dumps(request).encode(),
            capture_output=True,
            cwd=folder,
            env=env,
            timeout=_INVOCATION_TIMEOUT_S,
            check=False,
        )
        if child.returncode != 0:
            detail = child.stderr.decode(errors="replace").strip().splitlines()[-1:] or ["?"]
            return 500, {
                "error": "executor_error",
                "message": f"the archived build {build} could not run: {detail[0]}",
            }
        answer = json.loads(child.stdout)
        return int(answer["status"]), answer["body"]


class ArchivedBuildDispatcher:
    """The stack's dispatcher, which sends a pinned run's invocation to its archived build
    when the current code refuses it (``version_unavailable``)."""

    def __init__(self, inner: Dispatcher, archive: CodeArchive) -> None:
        self._inner = inner
        self.archive = archive

    def hosts_workflow(self, workflow_id: str) -> bool | None:
        """As the stack's own host says."""
        hosts = getattr(self._inner, "hosts_workflow", None)
        return hosts(workflow_id) if callable(hosts) else None

    def dispatch(self, request: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """The answer in wire form."""
        status, body = self._answer(request, self._inner.dispatch(request))
        return status, body

    def _answer(self, request: dict[str, Any], answer: tuple[int, Any]) -> tuple[int, Any]:
        status, body = answer
        refused = status == 409 and isinstance(body, dict) and body.get("error")
        pin = request.get("codeVersion")
        if refused != VERSION_UNAVAILABLE or not isinstance(pin, dict):
            return answer
        archived = self.archive.run(str(pin.get("build", "")), request)
        return answer if archived is None else archived


class ArchivedBuildInProcessDispatcher(ArchivedBuildDispatcher):
    """:class:`ArchivedBuildDispatcher` over a host in this process."""

    def __init__(self, inner: InProcessDispatcher, archive: CodeArchive) -> None:
        super().__init__(inner, archive)
        self._in_process = inner

    def dispatch_in_process(self, request: dict[str, Any]) -> tuple[int, Any]:
        """The answer, a 200's StepResponse as the stack's host gives it."""
        return self._answer(request, self._in_process.dispatch_in_process(request))


def archived(resolver: DispatcherResolver, archive: CodeArchive) -> DispatcherResolver:
    """``resolver`` whose in-process dispatchers send pinned runs to their archived builds."""

    def wrap(dispatcher: Dispatcher) -> Dispatcher:
        if isinstance(dispatcher, InProcessDispatcher):
            return ArchivedBuildInProcessDispatcher(dispatcher, archive)
        return ArchivedBuildDispatcher(dispatcher, archive)

    return DispatcherResolver(
        default=wrap(resolver.default),
        by_tenant_script={k: wrap(d) for k, d in resolver.by_tenant_script.items()},
        by_workflow={k: wrap(d) for k, d in resolver.by_workflow.items()},
    )


def live_builds(runs: RunStore) -> set[str]:
    """The builds live runs are on (every page of runs that have not ended)."""
    live = [status for status in _STATUSES if status not in TERMINAL_STATUSES]
    builds: set[str] = set()
    cursor: str | None = None
    while True:
        page = runs.list_runs(RunQuery(statuses=live, limit=500, cursor=cursor))
        builds.update(r.code_version.build for r in page.runs if r.code_version is not None)
        cursor = page.next_cursor
        if cursor is None:
            return builds
