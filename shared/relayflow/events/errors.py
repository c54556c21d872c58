"""Typed errors of event routing: predicates, input mappers, filter compilation, manifests,
ingest. They live in :mod:`relayflow.errors`; this path keeps working."""

from relayflow.errors import (
    EventFilterCompileError,
    EventTooLargeError,
    InputMapperError,
    InvalidEventError,
    ManifestValidationError,
    PredicateEvalError,
)

__all__ = [
    "EventFilterCompileError",
    "EventTooLargeError",
    "InputMapperError",
    "InvalidEventError",
    "ManifestValidationError",
    "PredicateEvalError",
]
