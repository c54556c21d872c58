"""The dev stack's saved state: moto's backends saved atomically and restored in process."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws

from relayflow.local.state import DevState, RequestGate, StateError

REGION = "us-east-1"
ROLE = "arn:aws:iam::123456789012:role/r"
TARGET = "arn:aws:lambda:us-east-1:123456789012:function:relayflow-drive"


@pytest.fixture
def credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.setenv(name, "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)


@pytest.fixture
def aws(credentials: None) -> Iterator[None]:
    with mock_aws():
        yield


def _fill() -> str:
    dynamodb = boto3.client("dynamodb", region_name=REGION)
    dynamodb.create_table(
        TableName="runs",
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    dynamodb.put_item(TableName="runs", Item={"pk": {"S": "run_1"}, "status": {"S": "waiting"}})
    s3 = boto3.client("s3", region_name=REGION)
    s3.create_bucket(Bucket="relayflow-payloads")
    s3.put_object(Bucket="relayflow-payloads", Key="p/1", Body=b"payload bytes")
    scheduler = boto3.client("scheduler", region_name=REGION)
    scheduler.create_schedule_group(Name="alarms")
    scheduler.create_schedule(
        Name="run_1",
        GroupName="alarms",
        ScheduleExpression="at(2030-01-01T00:00:00)",
        FlexibleTimeWindow={"Mode": "OFF"},
        Target={"Arn": TARGET, "RoleArn": ROLE, "Input": '{"runId": "run_1"}'},
    )
    sqs = boto3.client("sqs", region_name=REGION)
    queue = sqs.create_queue(QueueName="wakes")["QueueUrl"]
    sqs.send_message(QueueUrl=queue, MessageBody='{"runId": "run_1"}', DelaySeconds=1)
    return queue


def _read(queue: str) -> dict[str, Any]:
    dynamodb = boto3.client("dynamodb", region_name=REGION)
    item = dynamodb.get_item(TableName="runs", Key={"pk": {"S": "run_1"}}).get("Item")
    s3 = boto3.client("s3", region_name=REGION)
    body = s3.get_object(Bucket="relayflow-payloads", Key="p/1")["Body"].read()
    scheduler = boto3.client("scheduler", region_name=REGION)
    schedule = scheduler.get_schedule(Name="run_1", GroupName="alarms")
    sqs = boto3.client("sqs", region_name=REGION)
    received = sqs.receive_message(QueueUrl=queue, WaitTimeSeconds=2).get("Messages", [])
    return {
        "item": item,
        "body": body,
        "alarm": schedule["Target"]["Input"],
        "messages": [m["Body"] for m in received],
    }


def _open(folder: Path) -> DevState:
    state = DevState(folder)
    state.open()
    return state


def test_runs_payloads_alarms_and_delayed_messages_survive_a_restart(
    credentials: None, tmp_path: Path
) -> None:
    with mock_aws():
        queue = _fill()
        state = _open(tmp_path)
        assert state.save() is True
        state.close()

    with mock_aws():  # a new, empty moto: what a restarted process starts with
        tables = boto3.client("dynamodb", region_name=REGION).list_tables()["TableNames"]
        assert tables == []
        restored = _open(tmp_path)
        assert restored.restore() > 0
        assert _read(queue) == {
            "item": {"pk": {"S": "run_1"}, "status": {"S": "waiting"}},
            "body": b"payload bytes",
            "alarm": '{"runId": "run_1"}',
            "messages": ['{"runId": "run_1"}'],
        }
        restored.close()


def test_objects_survive_the_buckets_being_created_again_after_a_restore(
    credentials: None, tmp_path: Path
) -> None:
    """The stack creates its resources at every start; on a restored moto, creating a bucket
    that exists must keep it, objects and all (S3 finds buckets through an index of names
    that lives outside the saved backends)."""
    with mock_aws():
        _fill()
        state = _open(tmp_path)
        state.save()
        state.close()

    with mock_aws():
        restored = _open(tmp_path)
        restored.restore()
        s3 = boto3.client("s3", region_name=REGION)
        s3.create_bucket(Bucket="relayflow-payloads")  # as create_resources does
        body = s3.get_object(Bucket="relayflow-payloads", Key="p/1")["Body"].read()
        assert body == b"payload bytes"
        restored.close()


def test_nothing_is_written_when_nothing_changed(aws: None, tmp_path: Path) -> None:
    _fill()
    state = _open(tmp_path)
    assert state.save() is True
    assert state.save() is False
    boto3.client("dynamodb", region_name=REGION).put_item(
        TableName="runs", Item={"pk": {"S": "run_2"}}
    )
    assert state.save() is True
    state.close()


def test_a_crash_while_writing_keeps_the_previous_snapshot(
    aws: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fill()
    state = _open(tmp_path)
    state.save()
    before = state.snapshot_path.read_bytes()
    boto3.client("dynamodb", region_name=REGION).put_item(
        TableName="runs", Item={"pk": {"S": "run_2"}}
    )

    def crash(src: Any, dst: Any) -> None:
        raise OSError("killed before the rename")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError, match="killed"):
        state.save()
    assert state.snapshot_path.read_bytes() == before
    state.close()


def test_an_unreadable_snapshot_says_to_start_fresh(tmp_path: Path) -> None:
    state = _open(tmp_path)
    state.snapshot_path.write_bytes(b"not a pickle")
    with pytest.raises(StateError, match="--fresh"):
        state.restore()
    state.close()


def test_fresh_forgets_the_snapshot_and_the_settings(aws: None, tmp_path: Path) -> None:
    _fill()
    state = _open(tmp_path)
    state.save()
    state.save_settings({"token": "t"})
    state.close()
    again = DevState(tmp_path)
    again.open(fresh=True)
    assert again.restore() == 0
    assert again.settings() == {}
    again.close()


def test_one_folder_serves_one_stack_and_is_ignored_by_git(tmp_path: Path) -> None:
    first = _open(tmp_path / "state")
    with pytest.raises(StateError, match="another relayflow dev"):
        _open(tmp_path / "state")
    assert (tmp_path / "state" / ".gitignore").read_text().splitlines()[-1] == "*"
    first.close()
    _open(tmp_path / "state").close()


def test_the_gate_holds_requests_while_a_snapshot_is_taken() -> None:
    gate = RequestGate()
    served: list[str] = []

    def app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        served.append(environ["PATH_INFO"])
        return [b"ok"]

    gated = gate.wrap(app)
    with gate.hold():
        worker = threading.Thread(target=gated, args=({"PATH_INFO": "/x"}, None))
        worker.start()
        worker.join(timeout=0.2)
        assert worker.is_alive() and served == []
    worker.join(timeout=5)
    assert served == ["/x"]


def test_the_docs_state_the_snapshot_interval_the_stack_uses(tmp_path: Path) -> None:
    page = Path(__file__).resolve().parents[2] / "docs" / "getting-started" / "local-stack.md"
    readme = page.read_text()
    seconds = DevState(tmp_path).interval_s
    assert seconds == int(seconds)
    assert f"saved every {int(seconds)} seconds when something changed" in readme
    assert f"at most the\n  last {int(seconds)} seconds are lost" in readme
