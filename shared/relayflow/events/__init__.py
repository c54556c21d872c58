"""Event routing and manifests, byte-compatible with the reference runtime
(docs/reference/reference-runtime.md).

Canonical JSON and hashes, event ids, the ``where`` predicate and input mapper DSLs, event
filters (``trigger_on``), manifests and their retention, the router and event ingest.
"""

from relayflow.errors import (
    EventFilterCompileError,
    EventTooLargeError,
    InputMapperError,
    InvalidEventError,
    ManifestValidationError,
    PredicateEvalError,
)
from relayflow.events.canonical import (
    canonical_json,
    filter_hash,
    sha256_hex,
    short_hash,
    wire_json,
)
from relayflow.events.event_id import derive_event_id, effective_event_id
from relayflow.events.filters import (
    clear_filter_registry,
    compile_filter,
    registered_filters,
    trigger_on,
)
from relayflow.events.ingest import (
    MAX_EVENT_BYTES,
    IngestRequest,
    Trigger,
    TriggerRequest,
    check_event_size,
    event_size,
    handle_ingest_request,
    ingest_event,
    ingest_status,
    parse_json_body,
    validate_ingest_body,
)
from relayflow.events.input_mapper import project_input, validate_input_mapper
from relayflow.events.jsvalue import MISSING, MissingType
from relayflow.events.manifest import (
    ENVIRONMENTS,
    build_manifest,
    manifest_errors,
    manifest_version_id,
    prepare_manifest,
    validate_environment,
)
from relayflow.events.paths import resolve_path
from relayflow.events.predicate import (
    OPERATORS,
    ValidationResult,
    evaluate_predicate,
    validate_predicate,
)
from relayflow.events.retention import (
    DEFAULT_KEEP,
    ManifestVersion,
    RetentionPlan,
    plan_retention,
    record_registration,
)
from relayflow.events.router import FilterIndex, index_filters, route_event, run_id_for

__all__ = [
    "DEFAULT_KEEP",
    "ENVIRONMENTS",
    "MAX_EVENT_BYTES",
    "MISSING",
    "OPERATORS",
    "EventFilterCompileError",
    "EventTooLargeError",
    "FilterIndex",
    "IngestRequest",
    "InputMapperError",
    "InvalidEventError",
    "ManifestValidationError",
    "ManifestVersion",
    "MissingType",
    "PredicateEvalError",
    "RetentionPlan",
    "Trigger",
    "TriggerRequest",
    "ValidationResult",
    "build_manifest",
    "canonical_json",
    "check_event_size",
    "clear_filter_registry",
    "compile_filter",
    "derive_event_id",
    "effective_event_id",
    "evaluate_predicate",
    "event_size",
    "filter_hash",
    "handle_ingest_request",
    "index_filters",
    "ingest_event",
    "ingest_status",
    "manifest_errors",
    "manifest_version_id",
    "parse_json_body",
    "plan_retention",
    "prepare_manifest",
    "project_input",
    "record_registration",
    "registered_filters",
    "resolve_path",
    "route_event",
    "run_id_for",
    "sha256_hex",
    "short_hash",
    "trigger_on",
    "validate_environment",
    "validate_ingest_body",
    "validate_input_mapper",
    "validate_predicate",
    "wire_json",
]
