"""The code version a step host runs: what it answers with, and which pins it honours.

The build id identifies the workflow code. It is ``RELAYFLOW_BUILD_ID`` when set (a deploy
sets it to its commit, say, so that a change in any module counts), else a digest of the
source files of the modules whose workflows are registered: every process that loaded the
same code (the api and drive functions, several HTTP hosts) reports the same build. In
Lambda, the version also names the qualified function that ran the body, by which a
dispatcher reaches that code again.
"""

from __future__ import annotations

import hashlib
import os
import sys
from functools import lru_cache

from relayflow.protocol import CodeVersion
from relayflow.sdk.registry import Workflow, registered_workflows

__all__ = ["BUILD_ID_ENV", "host_code_version", "refuses_pin"]

#: Set it to name the build yourself (a commit, an image tag).
BUILD_ID_ENV = "RELAYFLOW_BUILD_ID"
_BUILD_ID_LENGTH = 12


def host_code_version() -> CodeVersion:
    """The code this process answers with."""
    return CodeVersion(build=_build_id(), function=_lambda_function())


def refuses_pin(workflow: Workflow[object], pin: CodeVersion | None, here: CodeVersion) -> bool:
    """Whether a request pinned to ``pin`` must be refused by a host running ``here``: the
    workflow keeps runs on their code and this is another build."""
    return pin is not None and pin.build != here.build and workflow.config.versioning == "pinned"


def _build_id() -> str:
    named = os.environ.get(BUILD_ID_ENV, "").strip()
    if named:
        return named
    files = tuple(sorted({f for w in registered_workflows() if (f := _source_file(w))}))
    return _digest(files)


@lru_cache(maxsize=64)
def _digest(files: tuple[str, ...]) -> str:
    # Keyed by the files only: a process runs the code it loaded, whatever changes on disk
    # after it started (a reload starts a new process, which digests anew).
    digest = hashlib.sha256()
    for path in files:
        digest.update(path.rsplit(os.sep, 1)[-1].encode())
        try:
            with open(path, "rb") as source:
                digest.update(source.read())
        except OSError:
            digest.update(b"?")
    return digest.hexdigest()[:_BUILD_ID_LENGTH]


def _source_file(workflow: Workflow[object]) -> str | None:
    # Every answer names the build: the module's own record of its file, nothing read on disk.
    module = sys.modules.get(getattr(workflow.fn, "__module__", "") or "")
    source = getattr(module, "__file__", None)
    return source if isinstance(source, str) and source.endswith(".py") else None


def _lambda_function() -> str | None:
    name = os.environ.get("AWS_LAMBDA_FUNCTION_NAME")
    version = os.environ.get("AWS_LAMBDA_FUNCTION_VERSION")
    if not name or not version:
        return None
    return f"{name}:{version}"
