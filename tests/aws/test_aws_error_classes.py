"""Every botocore failure is classified in one place (``adapters.aws.errors``): transient
ones may succeed on retry and never fail a run; the others carry a code naming the service
and what was refused."""

from __future__ import annotations

import pytest
from botocore.exceptions import ClientError, EndpointConnectionError, ReadTimeoutError

from relayflow.adapters.aws.errors import AwsRefusedError, translate, unavailable
from relayflow.errors import CheckpointUnavailableError, StorageRefusedError


def client_error(code: str, operation: str, status: int = 400, message: str = "") -> ClientError:
    return ClientError(
        {
            "Error": {"Code": code, "Message": message or code},
            "ResponseMetadata": {"HTTPStatusCode": status},
        },
        operation,
    )


@pytest.mark.parametrize(
    "exc",
    [
        client_error("ThrottlingException", "PutItem"),
        client_error("ProvisionedThroughputExceededException", "Query"),
        client_error("InternalServerError", "PutItem", 500),
        client_error("SlowDown", "PutObject", 503),
        client_error("SomethingNew", "SendMessage", 502),
        EndpointConnectionError(endpoint_url="https://dynamodb.eu-west-1.amazonaws.com"),
        ReadTimeoutError(endpoint_url="https://s3.eu-west-1.amazonaws.com"),
    ],
    ids=["throttled", "capacity", "500", "slowdown", "unknown-5xx", "unreachable", "timeout"],
)
def test_transient_failures_are_checkpoint_unavailable_and_never_refusals(
    exc: Exception,
) -> None:
    translated = translate(exc, "writing checkpoint 3 of run r")
    assert translated.transient
    assert not isinstance(translated, StorageRefusedError)
    assert translated.code == "aws_error"
    failed = unavailable(exc, "writing checkpoint 3 of run r")
    assert isinstance(failed, CheckpointUnavailableError)
    assert "writing checkpoint 3 of run r" in failed.message


@pytest.mark.parametrize(
    ("exc", "code", "named"),
    [
        (
            client_error(
                "AccessDeniedException",
                "PutItem",
                message="not authorized to perform: dynamodb:PutItem on resource: table/runs",
            ),
            "dynamodb_access_denied",
            "dynamodb:PutItem",
        ),
        (client_error("AccessDenied", "PutObject", 403), "s3_access_denied", "s3:PutObject"),
        (
            client_error("AccessDeniedException", "CreateSchedule"),
            "scheduler_access_denied",
            "scheduler:CreateSchedule",
        ),
        (
            client_error(
                "ValidationException",
                "PutItem",
                message="Item size has exceeded the maximum allowed size",
            ),
            "dynamodb_item_too_large",
            "400 KB",
        ),
        (
            client_error(
                "InvalidParameterValue",
                "SendMessage",
                message="One or more parameters are invalid. Reason: Message must be shorter "
                "than 262144 bytes.",
            ),
            "sqs_message_too_large",
            "256 KiB",
        ),
        (
            client_error("ValidationException", "UpdateItem", message="Invalid expression"),
            "dynamodb_request_refused",
            "UpdateItem",
        ),
    ],
    ids=["dynamodb-denied", "s3-denied", "scheduler-denied", "too-large", "sqs", "invalid"],
)
def test_refusals_name_the_service_and_what_was_refused(
    exc: ClientError, code: str, named: str
) -> None:
    translated = translate(exc, "saving run r")
    assert isinstance(translated, AwsRefusedError)
    assert isinstance(translated, StorageRefusedError)
    assert not translated.transient
    assert translated.code == code
    assert named in translated.message
    assert translated.message.startswith("saving run r failed")
    assert unavailable(exc, "saving run r") is None
