"""The faster moto that relayflow's mock applies answers exactly what moto answers.

Each case runs once on moto as it is and once on :func:`relayflow.testing.aws.mock_aws`
(which looks a queried partition up and writes attribute values without the generic
serializer), and the parsed answers must be equal.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import boto3
import moto
import pytest
from botocore.exceptions import ClientError

from relayflow.testing.aws import mock_aws

TABLE = "fast"
ITEM: dict[str, Any] = {
    "pk": {"S": "p1"},
    "sk": {"S": "0005"},
    "text": {"S": "héllo"},
    "empty": {"S": ""},
    "n": {"N": "-12.5e3"},
    "blob": {"B": b"\x00\xffbinary"},
    "yes": {"BOOL": True},
    "no": {"BOOL": False},
    "nothing": {"NULL": True},
    "strings": {"SS": ["a", "b"]},
    "numbers": {"NS": ["1", "2.5"]},
    "blobs": {"BS": [b"x", b"\x01"]},
    "map": {"M": {"inner": {"L": [{"S": "x"}, {"N": "1"}, {"M": {}}, {"L": []}]}}},
}


def _table(client: Any) -> None:
    client.create_table(
        TableName=TABLE,
        KeySchema=[
            {"AttributeName": "pk", "KeyType": "HASH"},
            {"AttributeName": "sk", "KeyType": "RANGE"},
        ],
        AttributeDefinitions=[
            {"AttributeName": "pk", "AttributeType": "S"},
            {"AttributeName": "sk", "AttributeType": "S"},
        ],
        BillingMode="PAY_PER_REQUEST",
    )
    for partition in ("p0", "p1", "p2"):
        for n in range(7):
            client.put_item(
                TableName=TABLE,
                Item={"pk": {"S": partition}, "sk": {"S": f"{n:04d}"}, "v": {"N": str(n)}},
            )
    client.put_item(TableName=TABLE, Item=ITEM)


def _answers(calls: Callable[[Any], list[Any]], mock: Any) -> list[Any]:
    with mock:
        client = boto3.client("dynamodb", region_name="eu-west-1")
        _table(client)
        answers = calls(client)
    for answer in answers:
        answer.pop("ResponseMetadata", None)
    return answers


def _reads(client: Any) -> list[Any]:
    key = {"pk": {"S": "p1"}, "sk": {"S": "0005"}}
    first = client.query(
        TableName=TABLE,
        KeyConditionExpression="pk = :p AND sk BETWEEN :a AND :b",
        ExpressionAttributeValues={":p": {"S": "p1"}, ":a": {"S": "0001"}, ":b": {"S": "0006"}},
        Limit=3,
        ScanIndexForward=False,
    )
    return [
        client.get_item(TableName=TABLE, Key=key, ConsistentRead=True),
        client.query(
            TableName=TABLE,
            KeyConditionExpression="pk = :p",
            ExpressionAttributeValues={":p": {"S": "p1"}},
            ReturnConsumedCapacity="TOTAL",
        ),
        first,
        client.query(
            TableName=TABLE,
            KeyConditionExpression="pk = :p AND sk BETWEEN :a AND :b",
            ExpressionAttributeValues={
                ":p": {"S": "p1"},
                ":a": {"S": "0001"},
                ":b": {"S": "0006"},
            },
            Limit=3,
            ScanIndexForward=False,
            ExclusiveStartKey=first["LastEvaluatedKey"],
        ),
        client.query(
            TableName=TABLE,
            KeyConditionExpression="pk = :p",
            ExpressionAttributeValues={":p": {"S": "absent"}},
        ),
        client.update_item(
            TableName=TABLE,
            Key=key,
            UpdateExpression="SET #n = :n",
            ExpressionAttributeNames={"#n": "n"},
            ExpressionAttributeValues={":n": {"N": "7"}},
            ReturnValues="ALL_NEW",
        ),
        client.scan(TableName=TABLE),
    ]


def _refusal(call: Callable[[], Any]) -> Any:
    try:
        return call()
    except ClientError as exc:
        return {"Error": exc.response["Error"], "Item": exc.response.get("Item")}


def _conditional_writes(client: Any) -> list[Any]:
    key = {"pk": {"S": "p1"}, "sk": {"S": "0005"}}
    fresh = {"pk": {"S": "p9"}, "sk": {"S": "0001"}, "fp": {"S": "f"}}
    claim = "attribute_not_exists(#pk) OR (attribute_not_exists(#a) AND #fp = :fp)"
    names = {"#pk": "pk", "#a": "answer", "#fp": "fp"}
    answers = []
    # The same expressions twice each: the second parse is the one a lexed expression serves.
    for _ in range(2):
        answers += [
            _refusal(
                lambda: client.put_item(
                    TableName=TABLE,
                    Item=fresh,
                    ConditionExpression=claim,
                    ExpressionAttributeNames=names,
                    ExpressionAttributeValues={":fp": {"S": "other"}},
                    ReturnValuesOnConditionCheckFailure="ALL_OLD",
                )
            ),
            _refusal(
                lambda: client.update_item(
                    TableName=TABLE,
                    Key=key,
                    UpdateExpression="SET #n = :n",
                    ConditionExpression="#n < :n AND size(#t) > :zero",
                    ExpressionAttributeNames={"#n": "n", "#t": "text"},
                    ExpressionAttributeValues={":n": {"N": "7"}, ":zero": {"N": "0"}},
                    ReturnValues="ALL_NEW",
                )
            ),
            _refusal(
                lambda: client.delete_item(
                    TableName=TABLE,
                    Key={"pk": {"S": "p0"}, "sk": {"S": "0001"}},
                    ConditionExpression="attribute_exists(v) AND v IN (:a, :b)",
                    ExpressionAttributeValues={":a": {"N": "1"}, ":b": {"N": "2"}},
                    ReturnValues="ALL_OLD",
                )
            ),
        ]
    answers.append(client.scan(TableName=TABLE))
    return answers


def _transactions(client: Any) -> list[Any]:
    """A transaction cancelled by its last item leaves every item it wrote as it was (the
    rollback copy); the same items without the failing check all apply."""
    key = {"pk": {"S": "p1"}, "sk": {"S": "0005"}}
    items: list[dict[str, Any]] = [
        {"Put": {"TableName": TABLE, "Item": {"pk": {"S": "p8"}, "sk": {"S": "0001"}}}},
        {
            "Update": {
                "TableName": TABLE,
                "Key": key,
                "UpdateExpression": "SET #n = #n + :one, #added = :one",
                "ExpressionAttributeNames": {"#n": "n", "#added": "added"},
                "ExpressionAttributeValues": {":one": {"N": "1"}},
            }
        },
        {"Delete": {"TableName": TABLE, "Key": {"pk": {"S": "p0"}, "sk": {"S": "0003"}}}},
    ]
    failing = {
        "ConditionCheck": {
            "TableName": TABLE,
            "Key": {"pk": {"S": "p2"}, "sk": {"S": "0002"}},
            "ConditionExpression": "v = :v",
            "ExpressionAttributeValues": {":v": {"N": "99"}},
        }
    }
    return [
        client.get_item(TableName=TABLE, Key=key, ConsistentRead=True),
        _refusal(lambda: client.transact_write_items(TransactItems=[*items, failing])),
        client.scan(TableName=TABLE),
        client.transact_write_items(TransactItems=items),
        client.scan(TableName=TABLE),
    ]


@pytest.mark.parametrize(
    "calls",
    [_reads, _conditional_writes, _transactions],
    ids=["reads", "conditional writes", "transactions"],
)
def test_the_faster_moto_answers_what_moto_answers(calls: Callable[[Any], list[Any]]) -> None:
    plain = _answers(calls, moto.mock_aws())
    faster = _answers(calls, mock_aws(region="eu-west-1"))
    # Compared as JSON text: True and 1 are equal in Python, not on the wire.
    assert _canonical(faster) == _canonical(plain)
    assert plain[0].get("Item", ITEM) == ITEM


def _canonical(answers: list[Any]) -> str:
    return json.dumps(answers, sort_keys=True, default=repr)
