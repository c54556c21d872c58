"""The exception tree of relayflow.

User-facing errors derive from :class:`RelayflowError`. Control-flow signals that must never be
caught by user code (suspending a body, cancelling it) derive from ``BaseException`` instead.
This module imports nothing else from relayflow, so every error that needs nothing else lives
here (the modules that raise them re-export them under their former paths). The exceptions
that do need more stay with what they need: the AWS-bound ones in
:mod:`relayflow.adapters.aws.errors` (``AwsServiceError``, ``AwsRefusedError``), the HTTP
API's in :mod:`relayflow.api.errors`, the command line's in :mod:`relayflow.cli`, and
``RequestReplayedError`` (its code is a wire constant of :mod:`relayflow.protocol`) in
:mod:`relayflow.dispatch.replay`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

USER_ERROR = "USER_ERROR"
RUNTIME_ERROR = "RUNTIME_ERROR"


class RelayflowError(Exception):
    """Base class of every error relayflow raises or serialises.

    Attributes:
        code: A stable machine-readable code (``FATAL``, ``TIMEOUT``...).
        category: ``USER_ERROR`` or ``RUNTIME_ERROR``.
        data: Optional JSON data carried with the error.
    """

    code: str = "UNKNOWN"
    category: str = USER_ERROR

    def __init__(self, message: str = "", *, code: str | None = None, data: Any = None) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        self.data = data


class FatalError(RelayflowError):
    """An error that is never retried, whatever its code."""

    code = "FATAL"


class RetryableError(RelayflowError):
    """An error that asks to be retried, optionally after ``retry_after`` (ms or duration)."""

    code = "RETRYABLE"

    def __init__(
        self,
        message: str = "",
        *,
        retry_after: int | str | None = None,
        code: str | None = None,
        data: Any = None,
    ) -> None:
        super().__init__(message, code=code, data=data)
        self.retry_after = retry_after


class StepTimeoutError(RelayflowError):
    """A step attempt ran longer than its ``timeout``."""

    code = "TIMEOUT"
    category = RUNTIME_ERROR


class StepInterruptedError(RelayflowError):
    """An ``at_most_once`` step attempt started but never finished; it is not re-run."""

    code = "STEP_INTERRUPTED"
    category = RUNTIME_ERROR
    #: The journal key of the step, when the error comes from a step.
    step_id: str | None = None


class StepStillRunningError(RelayflowError):
    """The code of a step attempt given up at its timeout still ran in the step host when
    the grace after that timeout ended: the next attempt was not started beside it."""

    code = "STEP_STILL_RUNNING"
    category = RUNTIME_ERROR


class NotJsonError(FatalError, TypeError):
    """A value that JSON cannot hold as it is (a set, a key that is not a string, bytes, a
    datetime...) was given where a run keeps values; never retried.

    ``data`` is ``{"path": ...}``, where in the value the problem is (``$.items[3].key``).
    """

    code = "NOT_JSON"


class StepFailedError(RelayflowError):
    """A step failed for good; raised in the body with the journalled code and message.

    Attributes:
        step_id: The journal key of the step that failed.
        error_name: The class name of the error the last attempt raised.
    """

    def __init__(
        self,
        message: str = "",
        *,
        code: str | None = None,
        data: Any = None,
        step_id: str | None = None,
        error_name: str | None = None,
    ) -> None:
        super().__init__(message, code=code, data=data)
        self.step_id = step_id
        self.error_name = error_name


class WaitTimeoutError(RelayflowError):
    """A wait reached its timeout with ``on_timeout="raise"``."""

    code = "WAIT_TIMEOUT"


class HeartbeatTimeoutError(WaitTimeoutError):
    """A token wait missed its heartbeat deadline."""

    code = "HEARTBEAT_TIMEOUT"


class TokenFailedError(RelayflowError):
    """An external party failed a token the workflow was waiting on."""

    code = "TOKEN_FAILED"


def child_ended_message(status: str) -> str:
    """The message of a child run that ended with ``status`` and no message of its own."""
    return f"child run ended with status {status}"


class ChildRunError(RelayflowError):
    """A child run started with ``ctx.invoke`` ended without completing.

    Its ``code`` is always ``CHILD_RUN_ENDED``; the child's own error is in ``child_code``
    and ``child_message`` (``CHILD_RUN_ENDED`` and a generated message when the child ended
    without an error of its own). Both are kept in ``data`` (``childCode``, ``childMessage``)
    so that they survive the journal: an error checkpointed by a group, and replayed from it,
    still carries them.
    """

    code = "CHILD_RUN_ENDED"

    def __init__(
        self,
        message: str = "",
        *,
        code: str | None = None,
        data: Any = None,
        child_code: str | None = None,
        child_message: str | None = None,
    ) -> None:
        facts = {"childCode": child_code, "childMessage": child_message}
        child = {key: value for key, value in facts.items() if value is not None}
        if child and (data is None or isinstance(data, dict)):
            data = {**(data or {}), **child}
        super().__init__(message, code=code, data=data)

    @property
    def child_code(self) -> str | None:
        """The code of the child's own error."""
        return self._child_fact("childCode")

    @property
    def child_message(self) -> str | None:
        """The message of the child's own error."""
        return self._child_fact("childMessage")

    def _child_fact(self, key: str) -> str | None:
        value = self.data.get(key) if isinstance(self.data, dict) else None
        return value if isinstance(value, str) else None


class NonDeterminismError(RelayflowError):
    """The body no longer matches its journal (a different kind at an id, or a lost step)."""

    code = "NON_DETERMINISM"
    category = RUNTIME_ERROR


class ConditionCheckError(RelayflowError):
    """The ``check`` function of ``ctx.wait_for_condition`` raised."""

    code = "CONDITION_CHECK_FAILED"


class ServiceNotFoundError(RelayflowError):
    """``ctx.services.resolve`` was asked for a service nobody registered."""

    code = "SERVICE_NOT_FOUND"


class WorkflowNotFoundError(RelayflowError):
    """No workflow is registered under the requested id."""

    code = "workflow_not_found"


class VersionNotFoundError(RelayflowError):
    """A trigger locked its run to a workflow version the environment's manifest does not
    list for the workflow: no run was created."""

    code = "version_not_found"


class ValidationError(RelayflowError):
    """Bad input to a relayflow API (the message names the offending value)."""

    code = "VALIDATION"


class RunNotFoundError(RelayflowError):
    """No run exists with the requested id."""

    code = "not_found"


class TokenNotFoundError(RelayflowError):
    """A token id that names no run: not a generated one, or another run's."""

    code = "token_not_found"


class RunTerminalError(RelayflowError):
    """The run already finished; it never changes again."""

    code = "run_terminal"


class RunPausedError(RelayflowError):
    """The run was paused: a step host found a pause in the run's checkpoint log and ends
    the invocation with what it did so far."""

    code = "run_paused"


class RunActionConflictError(RelayflowError):
    """An operator action does not apply to the run as it now stands (it moved on): the
    code says why (``already_paused``, ``not_paused``, ``not_started``, ``not_redrivable``,
    ``not_rerunnable``)."""

    code = "conflict"


class StepNotFoundError(RelayflowError):
    """A run has no top-level step with the given id (rerun from a step)."""

    code = "step_not_found"


class NotParkedError(RelayflowError):
    """The run is not waiting on anything an injection could resolve."""

    code = "not_parked"


class StaleRunError(RelayflowError):
    """A conditional save lost a race: the stored run has a newer version."""

    code = "stale_run"
    category = RUNTIME_ERROR


class RunAlreadyExistsError(RelayflowError):
    """An insert met an existing run with the same id; ``existing`` is that run."""

    code = "run_exists"

    def __init__(self, existing: Any) -> None:
        super().__init__("run already exists")
        self.existing = existing


class ScheduleNotFoundError(RelayflowError):
    """No schedule with the requested id is declared in the environment's current manifest."""

    code = "not_found"


class StaleScheduleError(RelayflowError):
    """A conditional save of a schedule's state lost a race (``existing``: the stored state)."""

    code = "stale_schedule"
    category = RUNTIME_ERROR

    def __init__(self, existing: Any) -> None:
        super().__init__("schedule state changed meanwhile")
        self.existing = existing


class DriverShutdownError(RelayflowError):
    """The driver was shut down; it refuses new work."""

    code = "driver_shutdown"
    category = RUNTIME_ERROR


class DispatchError(RelayflowError):
    """A step host could not be reached or answered badly.

    Attributes:
        transient: True when retrying may succeed (timeouts, 429, 5xx, unreachable).
        status: The HTTP status (or equivalent) the host answered, when there was one.
    """

    code = "handler_error"
    category = RUNTIME_ERROR

    def __init__(
        self, message: str, *, transient: bool, status: int | None = None, code: str | None = None
    ) -> None:
        super().__init__(message, code=code)
        self.transient = transient
        self.status = status


class CheckpointSlotTakenError(RelayflowError):
    """A checkpoint's slot in the run's log is taken (a fence, a cancel or another writer).

    Attributes:
        taken: The entry found in the slot, when the log could say.
    """

    code = "checkpoint_fenced"
    category = RUNTIME_ERROR

    def __init__(self, message: str, *, taken: Any = None) -> None:
        super().__init__(message)
        self.taken = taken


class CheckpointUnavailableError(RelayflowError):
    """A checkpoint could not be written (the orchestrator was unreachable or refused it).

    The host stops checkpointing and ends the invocation at once: its answer carries every
    step, so nothing is lost, and the orchestrator invokes the run again.
    """

    code = "checkpoint_unavailable"
    category = RUNTIME_ERROR


class StorageRefusedError(RelayflowError):
    """relayflow's own storage or alarms refused a request for good (a missing permission, a
    size limit): no retry can succeed. ``code`` names the service and what was refused
    (``dynamodb_access_denied``, ``dynamodb_item_too_large``...)."""

    category = RUNTIME_ERROR
    transient = False


# ---- Delivery ids and Idempotency-Keys -----------------------------------------------------------


class IdempotencyKeyReusedError(RelayflowError):
    """A delivery id came back with different content than its first use (HTTP 422)."""

    code = "idempotency_key_reused"


class RequestInProgressError(RelayflowError):
    """The first request with this delivery id has not answered yet (HTTP 409; retry)."""

    code = "request_in_progress"


# ---- Event routing: predicates, input mappers, filters, manifests, ingest ------------------------


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


# ---- Step hosts: signed requests and checkpoint capabilities -------------------------------------


class ReplayRecordFullError(RelayflowError):
    """The record of accepted signatures is full of unexpired ones (HTTP 503): the host
    refuses new requests rather than forget one early; the dispatcher retries later."""

    code = "replay_record_full"


class SignatureError(RelayflowError):
    """A step request's signature is missing, malformed, stale or wrong (HTTP 401)."""

    code = "unauthorized"


class CapabilityForbiddenError(RelayflowError):
    """A valid capability used for another run or a slot before its first (HTTP 403)."""

    code = "checkpoint_forbidden"


# ---- Payloads and inboxes ------------------------------------------------------------------------


class PayloadNotFoundError(RelayflowError):
    """A payload pointer names data the payload store does not hold."""

    code = "payload_not_found"
    category = RUNTIME_ERROR


class PayloadIntegrityError(RelayflowError):
    """Stored payload bytes do not match the digest their reference names."""

    code = "payload_corrupt"
    category = RUNTIME_ERROR


class InboxFullError(RelayflowError):
    """The run's inbox of early injections is full; the injection was refused."""

    code = "inbox_full"


class CheckpointFencedSignal(BaseException):
    """Raised in a step host whose checkpoint was refused: another driver holds the run now.

    The host stops the body and answers nothing more than ``checkpoint_fenced``.
    """


class RequestReplayedSignal(CheckpointFencedSignal):
    """Raised in a step host whose claim on an invocation's first slot found another claim
    there: the same step request was accepted before (a replay). Nothing of it runs."""


class CheckpointRefusedSignal(BaseException):
    """Carries, through user code that might catch it, a checkpoint write refused for good
    (a permission, a size limit) to the invocation's end, which fails the run with it.

    Attributes:
        error: The refusal.
    """

    def __init__(self, error: Exception) -> None:
        super().__init__(str(error))
        self.error = error


class SuspendSignal(BaseException):
    """Raised inside a body to stop the invocation at an unresolved wait."""


class CancelledSignal(BaseException):
    """Raised inside a body when the run was cancelled while it ran."""


class HostCrashSignal(BaseException):
    """Simulates the step host dying mid-invocation (``relayflow.testing.crash()``)."""


class CompensateRequestedSignal(BaseException):
    """Raised by ``ctx.compensate()``: the body stops and every registered compensation runs."""


class DriveAbandoned(BaseException):
    """Raised by a dispatcher when the process that drives the run died mid-invocation.

    The engine stops at once without saving anything (the lease stays with the dead holder
    until it expires); recovery drives it again from the last saved record, as the sweeper does.
    """
