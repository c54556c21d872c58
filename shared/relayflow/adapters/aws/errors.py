"""Translation of botocore failures into relayflow's typed errors."""

from __future__ import annotations

from typing import NoReturn

from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    ConnectionClosedError,
    ConnectTimeoutError,
    EndpointConnectionError,
    ReadTimeoutError,
)

from relayflow.errors import RUNTIME_ERROR, RelayflowError

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


class AwsServiceError(RelayflowError):
    """An AWS call failed in a way the adapter cannot turn into a domain outcome.

    Attributes:
        aws_code: The AWS error code (``ThrottlingException``...) or the botocore class name.
        transient: True when retrying later may succeed.
    """

    code = "aws_error"
    category = RUNTIME_ERROR

    def __init__(self, message: str, *, aws_code: str, transient: bool) -> None:
        super().__init__(message)
        self.aws_code = aws_code
        self.transient = transient


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
    if isinstance(
        exc,
        EndpointConnectionError | ConnectTimeoutError | ReadTimeoutError | ConnectionClosedError,
    ):
        return True
    if isinstance(exc, ClientError):
        status = http_status(exc)
        return error_code(exc) in TRANSIENT_CODES or (status is not None and status >= 500)
    return False


def is_aws_error(exc: BaseException) -> bool:
    """True for exceptions raised by botocore (service answers and transport failures)."""
    return isinstance(exc, ClientError | BotoCoreError)


def translate(exc: BaseException, action: str) -> AwsServiceError:
    """An :class:`AwsServiceError` describing ``exc`` raised while doing ``action``."""
    code = error_code(exc) or type(exc).__name__
    return AwsServiceError(
        f"{action} failed: {code}: {exc}", aws_code=code, transient=is_transient(exc)
    )


def reraise(exc: Exception, action: str) -> NoReturn:
    """Raise ``exc`` translated when it came from botocore, else unchanged."""
    if is_aws_error(exc):
        raise translate(exc, action) from exc
    raise exc
