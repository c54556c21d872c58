"""The dev stack's own AWS clients call the moto server's app in process, without a socket."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator

import boto3
import pytest
from botocore.exceptions import EndpointConnectionError

from relayflow.local.moto_direct import DirectMoto
from relayflow.local.moto_server import LocalMoto, start_moto
from relayflow.local.state import RequestGate, gate_moto_server

TABLE = "direct"


Served = tuple[LocalMoto, boto3.Session]


@pytest.fixture
def served() -> Iterator[Served]:
    """The moto server, and a session whose clients reach it in process."""
    local = start_moto(port=0)
    try:
        session = _session()
        DirectMoto(local.server, local.endpoint_url).attach(session)
        yield local, session
    finally:
        local.stop()


def _session() -> boto3.Session:
    return boto3.Session(
        aws_access_key_id="testing", aws_secret_access_key="testing", region_name="us-east-1"
    )


def test_direct_clients_share_the_server_s_state_and_need_no_socket(served: Served) -> None:
    local, session = served
    direct = session.client("dynamodb", endpoint_url=local.endpoint_url)
    over_http = _session().client("dynamodb", endpoint_url=local.endpoint_url)
    direct.create_table(
        TableName=TABLE,
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    direct.put_item(TableName=TABLE, Item={"pk": {"S": "a"}, "n": {"N": "1"}})
    seen = over_http.get_item(TableName=TABLE, Key={"pk": {"S": "a"}})
    assert seen["Item"]["n"] == {"N": "1"}
    with pytest.raises(direct.exceptions.ConditionalCheckFailedException):
        direct.put_item(
            TableName=TABLE,
            Item={"pk": {"S": "a"}},
            ConditionExpression="attribute_not_exists(pk)",
        )
    s3 = session.client("s3", endpoint_url=local.endpoint_url)
    s3.create_bucket(Bucket="direct-bucket")
    s3.put_object(Bucket="direct-bucket", Key="k", Body=b"x" * 100_000)
    assert s3.get_object(Bucket="direct-bucket", Key="k")["Body"].read() == b"x" * 100_000
    # With the port closed, only the in-process path still answers.
    local.server.stop()
    assert direct.get_item(TableName=TABLE, Key={"pk": {"S": "a"}})["Item"]["pk"] == {"S": "a"}
    with pytest.raises(EndpointConnectionError):
        _session().client(
            "dynamodb", endpoint_url=local.endpoint_url, config=_no_retries()
        ).get_item(TableName=TABLE, Key={"pk": {"S": "a"}})


def _create_queue(session: boto3.Session, endpoint_url: str) -> Callable[[], bool]:
    sqs = session.client("sqs", endpoint_url=endpoint_url)
    return lambda: bool(sqs.create_queue(QueueName="direct-gated")["QueueUrl"])


def _create_table(session: boto3.Session, endpoint_url: str) -> Callable[[], bool]:
    dynamodb = session.client("dynamodb", endpoint_url=endpoint_url)
    return lambda: bool(
        dynamodb.create_table(
            TableName=f"{TABLE}-gated",
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )["TableDescription"]
    )


@pytest.mark.parametrize("request_of", [_create_queue, _create_table], ids=["sqs", "dynamodb"])
def test_direct_requests_wait_for_the_state_gate(
    served: Served, request_of: Callable[[boto3.Session, str], Callable[[], bool]]
) -> None:
    local, session = served
    # Wrapped after the clients are made, as the stack does when it restores its state.
    gate = RequestGate()
    gate_moto_server(local.server, gate)
    send = request_of(session, local.endpoint_url)
    done = threading.Event()
    answers: list[bool] = []

    def create() -> None:
        answers.append(send())
        done.set()

    with gate.hold():
        worker = threading.Thread(target=create, daemon=True)
        worker.start()
        assert not done.wait(0.5), "a request was served while a snapshot held the gate"
    assert done.wait(10)
    worker.join(10)
    assert answers == [True]


def test_direct_dynamodb_errors_are_the_server_s(served: Served) -> None:
    local, session = served
    direct = session.client("dynamodb", endpoint_url=local.endpoint_url)
    over_http = _session().client("dynamodb", endpoint_url=local.endpoint_url)
    errors = []
    for client in (direct, over_http):
        with pytest.raises(client.exceptions.ClientError) as missing:
            client.get_item(TableName="absent", Key={"pk": {"S": "a"}})
        with pytest.raises(client.exceptions.ClientError) as invalid:
            client.query(TableName="absent", KeyConditionExpression="pk = ")
        errors.append(
            [
                (e.value.response["Error"]["Code"], e.value.response["Error"]["Message"])
                for e in (missing, invalid)
            ]
        )
    assert errors[0] == errors[1]
    assert errors[0][0][0] == "ResourceNotFoundException"


def _no_retries() -> object:
    from botocore.config import Config

    return Config(retries={"max_attempts": 1, "mode": "standard"}, connect_timeout=1)
