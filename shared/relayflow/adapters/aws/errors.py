"""Translation of botocore failures into relayflow's typed errors: the one place that decides
whether a failure of relayflow's own AWS resources may succeed on retry (throttling, 5xx,
timeouts, lost connections: never a reason to fail a run) or not (a refused permission, a
size limit, an invalid request: a code naming the service and what was refused)."""

from __future__ import annotations

from typing import NoReturn

from botocore.exceptions import BotoCoreError, ClientError, HTTPClientError
from botocore.exceptions import ConnectionError as BotocoreConnectionError

from relayflow.errors import (
    RUNTIME_ERROR,
    CheckpointUnavailableError,
    RelayflowError,
    StorageRefusedError,
)

#: Error codes AWS uses for throttling and temporary unavailability.
TRANSIENT_CODES = frozenset(
    {
        "Throttling",
        "ThrottlingException",
        "ThrottledException",
        "TooManyRequestsException",
        "RequestLimitExceeded",
        "ProvisionedThroughputExceededException",
        "RequestThrottled",
        "RequestThrottledException",
        "SlowDown",
        "ServiceUnavailable",
        "ServiceUnavailableException",
        "ServiceException",
        "InternalServerError",
        "InternalServerException",
        "InternalFailure",
        "EC2ThrottledException",
        "ResourceNotReadyException",
        "ResourceConflictException",
        "TransactionInProgressException",
        "LimitExceededException",
    }
)


#: Error codes of a request refused for want of a permission.
ACCESS_DENIED_CODES = frozenset(
    {
        "AccessDenied",
        "AccessDeniedException",
        "UnauthorizedOperation",
        "KMS.AccessDeniedException",
        "KMSAccessDeniedException",
        "AllAccessDisabled",
    }
)

#: The service of each operation relayflow calls (botocore's errors do not name it).
_SERVICE_OPERATIONS: dict[str, frozenset[str]] = {
    "dynamodb": frozenset(
        {
            "PutItem",
            "GetItem",
            "UpdateItem",
            "DeleteItem",
            "Query",
            "Scan",
            "BatchGetItem",
            "BatchWriteItem",
            "TransactWriteItems",
            "TransactGetItems",
        }
    ),
    "s3": frozenset({"PutObject", "GetObject", "HeadObject", "DeleteObject", "DeleteObjects"}),
    "scheduler": frozenset(
        {"CreateSchedule", "UpdateSchedule", "DeleteSchedule", "GetSchedule", "ListSchedules"}
    ),
    "sqs": frozenset({"SendMessage", "SendMessageBatch", "DeleteMessage", "ReceiveMessage"}),
    "lambda": frozenset({"Invoke"}),
}

#: Per service: the code of a request over its size limit, and the limit in words.
_SIZE_LIMITS: dict[str, tuple[str, str]] = {
    "dynamodb": ("dynamodb_item_too_large", "DynamoDB's item limit is 400 KB"),
    "s3": ("s3_object_too_large", "S3's single-request upload limit is 5 GB"),
    "sqs": ("sqs_message_too_large", "SQS's message limit is 256 KiB"),
    "scheduler": ("scheduler_input_too_large", "Scheduler's target input limit is 256 KiB"),
}
_TOO_LARGE_CODES = frozenset({"EntityTooLarge", "MessageTooLong", "RequestEntityTooLarge"})
_TOO_LARGE_WORDS = (
    "item size",
    "too large",
    "too long",
    "shorter than",
    "maximum allowed size",
)


class AwsServiceError(RelayflowError):
    """An AWS call failed in a way the adapter cannot turn into a domain outcome.

    ``code`` is ``aws_error`` for a transient failure; a permanent one names the service and
    what was refused: ``<service>_access_denied`` (the message names the permission),
    ``dynamodb_item_too_large`` (and the other size limits), or ``<service>_request_refused``.

    Attributes:
        aws_code: The AWS error code (``ThrottlingException``...) or the botocore class name.
        transient: True when retrying later may succeed.
    """

    code = "aws_error"
    category = RUNTIME_ERROR

    def __init__(
        self, message: str, *, aws_code: str, transient: bool, code: str | None = None
    ) -> None:
        super().__init__(message, code=code)
        self.aws_code = aws_code
        self.transient = transient


class AwsRefusedError(AwsServiceError, StorageRefusedError):
    """An AWS request refused for good: ``code`` names the service and what was refused."""


def error_code(exc: BaseException) -> str | None:
    """The AWS error code of a ``ClientError`` (None for anything else)."""
    if isinstance(exc, ClientError):
        code = exc.response.get("Error", {}).get("Code")
        return str(code) if code else None
    return None


def http_status(exc: BaseException) -> int | None:
    """The HTTP status of a ``ClientError`` (None for anything else)."""
    if isinstance(exc, ClientError):
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        return int(status) if status else None
    return None


def is_transient(exc: BaseException) -> bool:
    """True for throttling, 5xx answers, timeouts and lost connections."""
    if isinstance(exc, BotocoreConnectionError | HTTPClientError):
        # Every failure to connect, send or read an answer (timeouts, resets, closed sockets).
        return True
    if isinstance(exc, ClientError):
        status = http_status(exc)
        return error_code(exc) in TRANSIENT_CODES or (status is not None and status >= 500)
    return False


def is_aws_error(exc: BaseException) -> bool:
    """True for exceptions raised by botocore (service answers and transport failures)."""
    return isinstance(exc, ClientError | BotoCoreError)


def service_of(exc: BaseException) -> str:
    """The AWS service whose operation raised ``exc`` (``aws`` when it cannot tell)."""
    operation = getattr(exc, "operation_name", None)
    for service, operations in _SERVICE_OPERATIONS.items():
        if operation in operations:
            return service
    return "aws"


def _refusal(exc: BaseException, aws_code: str) -> tuple[str, str]:
    """The relayflow code of a permanent failure and what it means, in words."""
    service = service_of(exc)
    operation = getattr(exc, "operation_name", None) or "the request"
    if aws_code in ACCESS_DENIED_CODES:
        permission = f"{service}:{operation}" if service != "aws" else operation
        return f"{service}_access_denied", f"the role lacks the permission {permission}"
    text = str(exc).lower()
    too_large = aws_code in _TOO_LARGE_CODES or (
        aws_code in ("ValidationException", "InvalidParameterValue")
        and any(words in text for words in _TOO_LARGE_WORDS)
    )
    if too_large and service in _SIZE_LIMITS:
        return _SIZE_LIMITS[service]
    return f"{service}_request_refused", f"{service} refused {operation}; no retry can succeed"


def translate(exc: BaseException, action: str) -> AwsServiceError:
    """An :class:`AwsServiceError` describing ``exc`` raised while doing ``action``."""
    aws_code = error_code(exc) or type(exc).__name__
    transient = is_transient(exc)
    if transient or not isinstance(exc, ClientError):
        return AwsServiceError(
            f"{action} failed: {aws_code}: {exc}", aws_code=aws_code, transient=transient
        )
    code, meaning = _refusal(exc, aws_code)
    return AwsRefusedError(
        f"{action} failed ({meaning}): {aws_code}: {exc}",
        aws_code=aws_code,
        transient=False,
        code=code,
    )


def unavailable(exc: BaseException, action: str) -> CheckpointUnavailableError | None:
    """A :class:`CheckpointUnavailableError` when ``exc`` (raised while doing ``action``) is a
    transient AWS failure: the invocation ends keeping what it has and the run is driven
    again. None for a failure no retry fixes."""
    failure = exc if isinstance(exc, AwsServiceError) else None
    if failure is None and is_aws_error(exc):
        failure = translate(exc, action)
    if failure is None or not failure.transient:
        return None
    return CheckpointUnavailableError(failure.message)


def reraise(exc: Exception, action: str) -> NoReturn:
    """Raise ``exc`` translated when it came from botocore, else unchanged."""
    if is_aws_error(exc):
        raise translate(exc, action) from exc
    raise exc
