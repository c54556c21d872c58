"""Typed errors of event routing: predicates, input mappers, filter compilation, manifests, ingest.

Each derives from :class:`relayflow.errors.RelayflowError` and carries a stable ``code``.
"""

from __future__ import annotations

from collections.abc import Sequence

from relayflow.errors import RelayflowError


class PredicateEvalError(RelayflowError):
    """A ``where`` predicate is malformed and cannot be evaluated.

    Evaluation never fails on data (a missing path is simply "no value"); this error means
    the predicate itself has a bad shape. The router turns it into a ``where_eval_error`` skip.
    """

    code = "where_eval_error"


class InputMapperError(RelayflowError):
    """An input mapper is malformed and cannot project a workflow input.

    The router turns it into an ``input_projection_error`` skip.
    """

    code = "input_projection_error"


class EventFilterCompileError(RelayflowError):
    """An event filter declaration was refused at ``trigger_on`` / ``compile_filter`` time.

    Attributes:
        errors: The validator's messages (empty when the declaration itself is malformed).
    """

    code = "event_filter_invalid"

    def __init__(self, message: str, errors: Sequence[str] = ()) -> None:
        super().__init__(message, data={"errors": list(errors)})
        self.errors: list[str] = list(errors)


class ManifestValidationError(RelayflowError):
    """A manifest was refused at registration (the store fails closed).

    Attributes:
        errors: One message per problem found, in manifest order.
    """

    code = "invalid_manifest"

    def __init__(self, message: str, errors: Sequence[str] = ()) -> None:
        super().__init__(message, data={"errors": list(errors)})
        self.errors: list[str] = list(errors)


class InvalidEventError(RelayflowError):
    """An ingest request body or event envelope failed validation (HTTP 400 ``invalid_body``).

    The message is the reference's text for the first rule that failed.
    """

    code = "invalid_body"


class EventTooLargeError(RelayflowError):
    """An event envelope is larger than the ingest cap (HTTP 413 ``payload_too_large``).

    Attributes:
        size: The envelope's size in bytes (UTF-8 of its JSON text).
        limit: The cap in bytes.
    """

    code = "payload_too_large"

    def __init__(self, size: int, limit: int) -> None:
        super().__init__(
            f"event envelope is {size} bytes; the limit is {limit} bytes",
            data={"size": size, "limit": limit},
        )
        self.size = size
        self.limit = limit
