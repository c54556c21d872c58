"""Values over the inline cap move by reference through S3 and come back intact."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from aws_fakes import DictStore

from relayflow.adapters.aws.errors import AwsServiceError
from relayflow.adapters.aws.payloads import S3PayloadStore
from relayflow.errors import PayloadIntegrityError, PayloadNotFoundError, ValidationError
from relayflow.payloads import (
    POINTER_KEY,
    PayloadCodec,
    encode_value,
    is_pointer,
    offload,
    offload_step_response,
    resolve,
    resolve_step_request,
)

BUCKET = "relayflow-payloads"


@pytest.fixture
def s3(aws: None) -> Iterator[Any]:
    client = boto3.client("s3", region_name="eu-west-1")
    client.create_bucket(
        Bucket=BUCKET, CreateBucketConfiguration={"LocationConstraint": "eu-west-1"}
    )
    yield client


@pytest.fixture
def store(s3: Any) -> S3PayloadStore:
    return S3PayloadStore(BUCKET, client_factory=lambda: s3)


def test_put_is_content_addressed_encrypted_and_idempotent(store: S3PayloadStore, s3: Any) -> None:
    data = b'{"hello":"world"}'
    ref = store.put(data)
    digest = hashlib.sha256(data).hexdigest()
    assert ref == f"sha256:{digest}"
    assert store.put(data) == ref
    head = s3.head_object(Bucket=BUCKET, Key=f"payloads/{digest}")
    assert head["ServerSideEncryption"] == "AES256"
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=BUCKET)["Contents"]]
    assert keys == [f"payloads/{digest}"]
    assert store.get(ref) == data


def test_put_never_overwrites_an_existing_object(store: S3PayloadStore, s3: Any) -> None:
    data = b'"value"'
    digest = hashlib.sha256(data).hexdigest()
    s3.put_object(Bucket=BUCKET, Key=f"payloads/{digest}", Body=data)
    first_etag = s3.head_object(Bucket=BUCKET, Key=f"payloads/{digest}")["ETag"]
    store.put(data)
    assert s3.head_object(Bucket=BUCKET, Key=f"payloads/{digest}")["ETag"] == first_etag


def test_missing_payload_is_a_typed_error(store: S3PayloadStore) -> None:
    with pytest.raises(PayloadNotFoundError, match="sha256:"):
        store.get("sha256:" + "0" * 64)


def test_tampered_payload_is_detected(store: S3PayloadStore, s3: Any) -> None:
    ref = store.put(b"1")
    s3.put_object(Bucket=BUCKET, Key=store.key_of(ref), Body=b"2")
    with pytest.raises(PayloadIntegrityError):
        store.get(ref)


@pytest.mark.parametrize("ref", ["payloads/abc", "sha256:xyz", "../../etc/passwd", ""])
def test_foreign_references_are_refused(store: S3PayloadStore, ref: str) -> None:
    with pytest.raises(ValidationError):
        store.get(ref)


def test_other_s3_failures_are_translated(aws: None) -> None:
    client = boto3.client("s3", region_name="eu-west-1")
    store = S3PayloadStore("no-such-bucket", client_factory=lambda: client)
    with pytest.raises(AwsServiceError, match="NoSuchBucket"):
        store.put(b"x")


def test_a_5_mb_value_round_trips_through_s3(store: S3PayloadStore) -> None:
    value = {"rows": ["x" * 1000 + str(i) for i in range(5000)], "note": "Zoë"}
    pointer = offload(value, store)
    assert is_pointer(pointer)
    assert pointer["size"] == len(encode_value(value)) > 5_000_000
    assert resolve(pointer, store) == value


@pytest.mark.parametrize(
    ("value", "offloaded"),
    [
        (None, False),
        (12345, False),
        ("x" * 100, False),
        ("x" * 200, True),
        ({"k": "v" * 200}, True),
        ([1] * 10, False),
    ],
)
def test_only_values_over_the_cap_are_offloaded(value: Any, offloaded: bool) -> None:
    store = DictStore()
    result = offload(value, store, cap=128)
    assert is_pointer(result) is offloaded
    assert resolve(result, store) == value


def test_pointer_shape_and_non_pointers_are_left_alone() -> None:
    store = DictStore()
    pointer = offload("y" * 100, store, cap=10)
    assert set(pointer) == {POINTER_KEY, "size"}
    assert pointer["size"] == 102
    lookalike = {POINTER_KEY: "sha256:x", "size": 1, "other": True}
    assert resolve(lookalike, store) is lookalike
    assert offload(pointer, store, cap=10) is pointer


def test_step_request_and_response_values_are_mapped() -> None:
    store = DictStore()
    big = {"blob": "b" * 500}
    codec = PayloadCodec(store, cap=100)
    response = {
        "status": "waiting",
        "output": big,
        "journal": {
            "stepResults": {
                "a": {"status": "ok", "output": big},
                "b": {"status": "ok", "output": 1},
            },
            "waitpointsResolved": {"event:x:0": {"kind": "EVENT", "payload": big}},
        },
        "waitpoints": [
            {"clientWaitpointId": "invoke:c:1", "kind": "RUN", "meta": {"childInput": big}}
        ],
    }
    wire = codec.offload_step_response(response)
    assert is_pointer(wire["output"])
    assert is_pointer(wire["journal"]["stepResults"]["a"]["output"])
    assert wire["journal"]["stepResults"]["b"]["output"] == 1
    assert is_pointer(wire["journal"]["waitpointsResolved"]["event:x:0"]["payload"])
    assert is_pointer(wire["waitpoints"][0]["meta"]["childInput"])
    assert store.puts == 1, "equal values are stored once per codec"
    assert response["journal"]["stepResults"]["a"]["output"] == big, "the input is not mutated"
    assert codec.resolve_step_response(wire) == response
    request = {"runId": "r", "input": big, "journal": wire["journal"]}
    resolved = resolve_step_request(codec.offload_step_request(request), store)
    assert resolved["input"] == big
    assert resolved["journal"]["stepResults"]["a"]["output"] == big


def test_values_a_codec_resolved_are_not_uploaded_again() -> None:
    store = DictStore()
    big = ["z" * 300]
    request = {
        "runId": "r",
        "journal": {"stepResults": {"a": {"output": offload(big, store, cap=10)}}},
    }
    assert store.puts == 1
    codec = PayloadCodec(store, cap=10)
    seen = codec.resolve_step_request(request)
    answer = codec.offload_step_response({"status": "completed", "journal": seen["journal"]})
    assert store.puts == 1
    assert (
        answer["journal"]["stepResults"]["a"]["output"]
        == request["journal"]["stepResults"]["a"]["output"]
    )
    assert (
        json.loads(store.get(answer["journal"]["stepResults"]["a"]["output"][POINTER_KEY])) == big
    )


def test_module_level_offload_step_response_uses_the_cap() -> None:
    store = DictStore()
    answer = offload_step_response({"status": "completed", "output": "q" * 50}, store, cap=10)
    assert is_pointer(answer["output"])
