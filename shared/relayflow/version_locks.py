"""``lockToVersion``: a trigger naming the workflow version its run carries
(``RunRecord.workflow_version``, sent to the step host in every request).

When the environment has a manifest registered, the version must be the one the manifest's
entry of the workflow declares (``{id, version, ...}``): a run locked to a version the
deployment does not describe would run code nobody registered. Without a manifest the
version is taken as given. See docs/guides/versioning.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from relayflow.errors import VersionNotFoundError

#: The workflow version of a run whose trigger names none.
DEFAULT_WORKFLOW_VERSION = "v1"
#: The longest version label a trigger may name.
MAX_VERSION_LENGTH = 128


def check_locked_version(
    manifest: Mapping[str, Any] | None, workflow_id: str, environment: str, version: str
) -> None:
    """Refuse ``version`` when ``manifest`` (the environment's current one, None: none is
    registered) lists ``workflow_id`` under another version.

    A manifest that does not list the workflow at all is not this check's to refuse (the
    trigger answers ``workflow_not_found`` for it).

    Raises:
        VersionNotFoundError: The manifest's entry of the workflow has another version.
    """
    if manifest is None:
        return
    entry = next(
        (
            w
            for w in manifest.get("workflows", [])
            if isinstance(w, Mapping) and w.get("id") == workflow_id
        ),
        None,
    )
    if entry is None:
        return
    listed = entry.get("version")
    if listed != version:
        raise VersionNotFoundError(
            f"workflow {workflow_id!r} has no version {version!r} in the manifest registered "
            f"for {environment!r} (it lists version {listed!r}); lock the run to that version "
            "or register the manifest of the version you need"
        )
