"""Manifests: building one from workflows and filters, its content-derived ``versionId``, and the
validation every manifest store runs before registering one (``prepare_manifest``).
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from typing import Any

from relayflow.clock import wall_ms
from relayflow.errors import ManifestValidationError, ValidationError
from relayflow.events.canonical import short_hash
from relayflow.events.filters import registered_filters
from relayflow.events.input_mapper import validate_input_mapper
from relayflow.events.jsvalue import MISSING, is_number
from relayflow.events.predicate import validate_predicate

ENVIRONMENTS = ("production", "preview", "development")
"""The environment names manifests are registered under and events are sent to."""

DEFAULT_PROJECT_ID = "default"
DEFAULT_BUILDER_VERSION = "@voyantjs/workflows@manifest-builder/v1"

_IDENTITY_KEYS = (
    "schemaVersion",
    "projectId",
    "builderVersion",
    "capabilities",
    "workflows",
    "eventFilters",
    "bindings",
    "environments",
)
_WORKFLOW_FIELDS = (
    "version",
    "inputSchema",
    "outputSchema",
    "steps",
    "schedules",
    "defaultRuntime",
    "hasCompensation",
    "sourceLocation",
    "concurrency",
)


def manifest_version_id(manifest: Mapping[str, Any]) -> str:
    """The content-derived ``versionId`` of a manifest.

    The first 16 hex characters of the SHA-256 of the canonical JSON of its identity fields
    (``schemaVersion, projectId, builderVersion, capabilities, workflows, eventFilters,
    bindings, environments``); ``builtAt`` and ``versionId`` do not count.
    """
    return short_hash({key: manifest.get(key, MISSING) for key in _IDENTITY_KEYS})


def _workflow_entry(item: Any) -> dict[str, Any]:
    config: Any = None
    fields: Mapping[str, Any] = {}
    if isinstance(item, str):
        workflow_id: Any = item
    elif isinstance(item, Mapping):
        workflow_id = item.get("id")
        config = item.get("config")
        fields = item
    else:
        workflow_id = getattr(item, "id", None)
        config = getattr(item, "config", None)
        runtime = getattr(item, "default_runtime", None)
        fields = {"defaultRuntime": runtime} if runtime is not None else {}
        declared = getattr(config, "schedules", ())
        if declared:
            fields = {**fields, "schedules": [s.to_manifest() for s in declared]}
        concurrency = getattr(config, "concurrency", None)
        wire = concurrency.to_wire() if concurrency is not None else None
        if wire is not None:
            fields = {**fields, "concurrency": wire}
    if not isinstance(workflow_id, str) or not workflow_id:
        raise ValidationError(f"a workflow needs a non-empty string id, got {item!r}")
    if isinstance(config, Mapping):
        runtime = config.get("defaultRuntime")
    else:
        runtime = getattr(config, "default_runtime", None)
    entry: dict[str, Any] = {
        "id": workflow_id,
        "version": "v1",
        "steps": [],
        "schedules": [],
        "defaultRuntime": runtime if runtime is not None else "edge",
        "hasCompensation": False,
        "sourceLocation": {"file": "<runtime>", "line": 0},
    }
    for key in _WORKFLOW_FIELDS:
        if key in fields:
            entry[key] = copy.deepcopy(fields[key])
    return entry


def build_manifest(
    *,
    environment: str,
    workflows: Iterable[Any],
    event_filters: Iterable[Mapping[str, Any]] | None = None,
    project_id: str = DEFAULT_PROJECT_ID,
    built_at: int | None = None,
    builder_version: str = DEFAULT_BUILDER_VERSION,
) -> dict[str, Any]:
    """Build a deterministic manifest (same inputs, same ``versionId``).

    Each workflow becomes the reference's template entry ``{id, version: "v1", steps: [],
    schedules: [], defaultRuntime, hasCompensation: false, sourceLocation}``; dict items may
    also carry ``inputSchema``, ``outputSchema``, ``concurrency`` and the template's own fields
    to override. A registered workflow's ``concurrency`` (with a path key) enters its entry as
    ``{key?, limit, strategy}``. Like the reference builder, a dict item's ``config`` gives
    only ``defaultRuntime``: the rest of a reference ``config`` stays out of the manifest.
    Workflows and filters are ordered by id (code-point order, stable; duplicates are kept here
    and refused at registration).

    Args:
        environment: Target environment; like the reference, it does not enter the manifest.
        workflows: Workflow ids, ``{"id", "config"?: {"defaultRuntime"}}`` dicts, or objects
            with an ``id`` (and optionally ``default_runtime``).
        event_filters: Compiled filter entries; None takes :func:`registered_filters`.
        project_id: The project id (``"default"``).
        built_at: Build time in epoch ms (now when None); not part of the identity.
        builder_version: The builder version string that enters the identity.

    Returns:
        The manifest, ``versionId`` included.

    Raises:
        ValidationError: A workflow has no id, or a filter entry is not a dict with an id.
    """
    if not isinstance(environment, str):
        raise ValidationError(f"environment must be a string, got {environment!r}")
    entries = sorted((_workflow_entry(item) for item in workflows), key=lambda e: e["id"])
    filters = registered_filters() if event_filters is None else list(event_filters)
    for flt in filters:
        if not isinstance(flt, Mapping) or not isinstance(flt.get("id"), str):
            raise ValidationError(f"an event filter must be a dict with a string id, got {flt!r}")
    filter_entries = sorted((copy.deepcopy(dict(f)) for f in filters), key=lambda f: f["id"])
    manifest: dict[str, Any] = {
        "schemaVersion": 1,
        "projectId": project_id,
        # builtAt is informational only (not part of the identity), so the wall clock is fine.
        "builtAt": built_at if built_at is not None else wall_ms(),
        "builderVersion": builder_version,
        "capabilities": ["events:v1"],
        "workflows": entries,
        "eventFilters": filter_entries,
        "bindings": {},
        "environments": {"production": {}, "preview": {}, "development": {}},
    }
    manifest["versionId"] = manifest_version_id(manifest)
    return manifest


def _filter_errors(index: int, flt: Any, seen: set[str]) -> list[str]:
    where = f"eventFilters.{index}"
    if not isinstance(flt, dict):
        return [f"{where}: must be an object"]
    errors: list[str] = []
    filter_id = flt.get("id")
    if not isinstance(filter_id, str) or not filter_id:
        errors.append(f"{where}: id must be a non-empty string")
    elif filter_id in seen:
        errors.append(f"{where}: duplicate filter id {filter_id!r}")
    else:
        seen.add(filter_id)
        where = f"{where} ({filter_id})"
    for key in ("eventType", "targetWorkflowId"):
        if not isinstance(flt.get(key), str) or not flt[key]:
            errors.append(f"{where}: {key} must be a non-empty string")
    if "where" in flt:
        errors.extend(f"{where}: where: {e}" for e in validate_predicate(flt["where"]).errors)
    if "input" in flt:
        errors.extend(f"{where}: input: {e}" for e in validate_input_mapper(flt["input"]).errors)
    return errors


def manifest_errors(manifest: Any) -> list[str]:
    """Every reason a store would refuse ``manifest`` (empty when it may be registered).

    Checks: a dict with ``schemaVersion`` 1; ``workflows`` a list of objects with unique,
    non-empty string ids; ``eventFilters`` a list of objects with unique non-empty string ids,
    non-empty string ``eventType`` and ``targetWorkflowId``, and a ``where``/``input`` (when
    present, even as null) that pass the validators; a workflow's ``concurrency`` (when
    present) a valid ``{key?, limit, strategy?}``; ``bindings``/``environments`` objects when
    present; ``versionId`` absent or equal to :func:`manifest_version_id`.
    """
    if not isinstance(manifest, dict):
        return ["(root): manifest must be an object"]
    errors: list[str] = []
    schema = manifest.get("schemaVersion")
    if not is_number(schema) or schema != 1:
        errors.append(f"schemaVersion: must be 1, got {schema!r}")
    workflows = manifest.get("workflows")
    if not isinstance(workflows, list):
        errors.append("workflows: must be a list")
    else:
        from relayflow.flow.declarations import concurrency_errors

        seen_workflows: set[str] = set()
        for i, wf in enumerate(workflows):
            wf_id = wf.get("id") if isinstance(wf, dict) else None
            if not isinstance(wf_id, str) or not wf_id:
                errors.append(f"workflows.{i}: must be an object with a non-empty string id")
            elif wf_id in seen_workflows:
                errors.append(f"workflows.{i}: duplicate workflow id {wf_id!r}")
            else:
                seen_workflows.add(wf_id)
            if isinstance(wf, dict) and "concurrency" in wf:
                errors.extend(
                    f"workflows.{i}.concurrency: {problem}"
                    for problem in concurrency_errors(wf["concurrency"])
                )
        from relayflow.schedules.spec import schedule_errors

        errors.extend(schedule_errors(workflows))
    filters = manifest.get("eventFilters")
    if not isinstance(filters, list):
        errors.append("eventFilters: must be a list")
    else:
        seen_filters: set[str] = set()
        for i, flt in enumerate(filters):
            errors.extend(_filter_errors(i, flt, seen_filters))
    for key in ("bindings", "environments"):
        if key in manifest and not isinstance(manifest[key], dict):
            errors.append(f"{key}: must be an object")
    version_id = manifest.get("versionId")
    if version_id is not None and not errors:
        expected = manifest_version_id(manifest)
        if version_id != expected:
            errors.append(
                f"versionId: {version_id!r} does not match the manifest's content "
                f"(expected {expected!r})"
            )
    return errors


def prepare_manifest(manifest: Any) -> tuple[str, dict[str, Any]]:
    """Validate a manifest for registration and settle its ``versionId``.

    Stores fail closed: a manifest with any problem listed by :func:`manifest_errors` is
    refused as a whole. An absent ``versionId`` is computed from the content; a present one
    must equal it, so a ``versionId`` always identifies one content.

    Args:
        manifest: The manifest to register.

    Returns:
        ``(version_id, manifest)``: a deep copy carrying its ``versionId``.

    Raises:
        ManifestValidationError: With every problem in ``.errors``.
    """
    errors = manifest_errors(manifest)
    if errors:
        raise ManifestValidationError(
            f"manifest refused: {errors[0]}"
            + (f" (+{len(errors) - 1} more)" if errors[1:] else ""),
            errors,
        )
    prepared = copy.deepcopy(manifest)
    version_id = manifest_version_id(prepared)
    prepared["versionId"] = version_id
    return version_id, prepared


def validate_environment(environment: object) -> str:
    """Return ``environment`` if it is one of :data:`ENVIRONMENTS`; raise ValidationError."""
    if not isinstance(environment, str) or environment not in ENVIRONMENTS:
        raise ValidationError(
            f"environment must be one of {', '.join(ENVIRONMENTS)}, got {environment!r}"
        )
    return environment
