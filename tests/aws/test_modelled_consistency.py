"""What moto does not model, modelled on purpose by ``relayflow.testing.aws.mock_aws``:
global secondary indexes that lag behind their table, and ``BatchWriteItem`` calls that leave
items unprocessed; and relayflow coping with both (no run missed for good, no item dropped)."""

from __future__ import annotations

from typing import Any

import boto3
import pytest

import tests.contract.contract_workflows as wf
from relayflow import workflow
from relayflow.adapters.aws import tables
from relayflow.testing.aws import mock_aws
from tests.aws.moto_driver import SETTINGS, moto_driver
from tests.moto_support import moto_backend

TABLE = "items"
MINUTE = 60_000


def make_table(client: Any) -> None:
    client.create_table(
        TableName=TABLE,
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[
            {"AttributeName": "pk", "AttributeType": "S"},
            {"AttributeName": "colour", "AttributeType": "S"},
        ],
        GlobalSecondaryIndexes=[
            {
                "IndexName": "by-colour",
                "KeySchema": [{"AttributeName": "colour", "KeyType": "HASH"}],
                "Projection": {"ProjectionType": "ALL"},
            }
        ],
        BillingMode="PAY_PER_REQUEST",
    )


def by_colour(client: Any, colour: str) -> list[str]:
    answer = client.query(
        TableName=TABLE,
        IndexName="by-colour",
        KeyConditionExpression="colour = :c",
        ExpressionAttributeValues={":c": {"S": colour}},
    )
    return sorted(item["pk"]["S"] for item in answer["Items"])


def test_an_index_partition_sees_a_write_only_after_the_lag() -> None:
    with mock_aws(gsi_lag=2):
        client = boto3.client("dynamodb")
        make_table(client)
        client.put_item(TableName=TABLE, Item={"pk": {"S": "a"}, "colour": {"S": "red"}})

        assert by_colour(client, "red") == []
        assert by_colour(client, "red") == []
        assert by_colour(client, "red") == ["a"]
        # The table itself is strongly consistent, and other partitions lag on their own.
        assert "Item" in client.get_item(TableName=TABLE, Key={"pk": {"S": "a"}})
        assert by_colour(client, "blue") == []


def test_an_index_keeps_showing_an_item_that_moved_until_the_lag_passed() -> None:
    with mock_aws(gsi_lag=1):
        client = boto3.client("dynamodb")
        make_table(client)
        client.put_item(TableName=TABLE, Item={"pk": {"S": "a"}, "colour": {"S": "red"}})
        by_colour(client, "red")
        assert by_colour(client, "red") == ["a"]
        client.put_item(TableName=TABLE, Item={"pk": {"S": "a"}, "colour": {"S": "blue"}})

        assert by_colour(client, "red") == ["a"]
        assert by_colour(client, "red") == []


def test_without_the_mode_indexes_are_current() -> None:
    with mock_aws():
        client = boto3.client("dynamodb")
        make_table(client)
        client.put_item(TableName=TABLE, Item={"pk": {"S": "a"}, "colour": {"S": "red"}})
        assert by_colour(client, "red") == ["a"]


def test_a_batch_write_leaves_its_last_items_unprocessed() -> None:
    with mock_aws(unprocessed_items=2):
        client = boto3.client("dynamodb")
        make_table(client)
        requests = [
            {"PutRequest": {"Item": {"pk": {"S": f"k{n}"}, "colour": {"S": "red"}}}}
            for n in range(5)
        ]

        answer = client.batch_write_item(RequestItems={TABLE: requests})

        assert answer["UnprocessedItems"] == {TABLE: requests[3:]}
        stored = client.scan(TableName=TABLE)["Items"]
        assert sorted(item["pk"]["S"] for item in stored) == ["k0", "k1", "k2"]
        # At least one item is always written, so a retry loop makes progress.
        again = client.batch_write_item(RequestItems={TABLE: requests[3:]})
        assert again["UnprocessedItems"] == {TABLE: requests[4:]}


def test_two_mocks_cannot_model_at_once() -> None:
    from relayflow.errors import ValidationError

    with mock_aws(gsi_lag=1), pytest.raises(ValidationError), mock_aws(unprocessed_items=1):
        pass


# ---- relayflow copes -------------------------------------------------------------------------


def lose_every_alarm(env: Any) -> None:
    """As if Scheduler never delivered: the sweeper is the only way back."""
    for run_id, _ in env.alarms.pending():
        env.alarms.disarm(run_id)


def test_runs_a_lagging_index_hides_from_the_sweeper_are_swept_later() -> None:
    with moto_backend(gsi_lag=2):
        recorder = wf.Recorder()
        env = moto_driver(workflows=[wf.sleepy], services={"rec": recorder})
        runs = [env.trigger("ct.sleepy", None).id for _ in range(6)]
        lose_every_alarm(env)
        env.clock.advance(11 * MINUTE)

        swept: list[list[str]] = [env.sweep() for _ in range(4)]

        # The index hid them from the first sweeps; none was missed for good (later sweeps
        # see them again from the stale index, which drives nothing twice).
        assert swept[0] == []
        assert {run for batch in swept for run in batch} == set(runs)
        assert {env.get_run(run).status for run in runs} == {"completed"}
        assert recorder.items.count("after") == len(runs)


def test_a_sweep_of_stale_index_entries_changes_nothing() -> None:
    with moto_backend(gsi_lag=1):
        recorder = wf.Recorder()
        env = moto_driver(workflows=[wf.sleepy], services={"rec": recorder})
        run = env.trigger("ct.sleepy", None).id
        lose_every_alarm(env)
        env.clock.advance(11 * MINUTE)
        assert env.sweep() == []  # the index does not hold the run yet
        assert env.sweep() == [run]
        assert env.get_run(run).status == "completed"

        # The index still lists the run as due once more: driving it again is harmless.
        env.sweep()
        assert env.get_run(run).status == "completed"
        assert recorder.items.count("after") == 1


def test_listings_through_a_lagging_index_never_show_a_run_in_the_wrong_status() -> None:
    with moto_backend(gsi_lag=1):
        env = moto_driver(workflows=[wf.approval])
        run = env.trigger("ct.approval", None).id
        env.list_runs(status="waiting")
        assert [r.id for r in env.list_runs(status="waiting").runs] == [run]
        env.signal(run, "approve", True)
        assert env.get_run(run).status == "completed"

        for _ in range(3):
            assert [r.id for r in env.list_runs(status="waiting").runs] == []
        # The completed partition lists it once its index caught up.
        assert [r.id for r in env.list_runs(status="completed").runs] == []
        assert [r.id for r in env.list_runs(status="completed").runs] == [run]


@workflow(id="ct.bulky_steps")
def bulky_steps(data: Any, ctx: Any) -> Any:
    # Large step results fill several journal pages; the last save stamps them all in batches.
    return sum(len(ctx.step(f"s{i}", lambda: "x" * 3000)) for i in range(data["n"]))


def count_unprocessed_answers(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many items each ``BatchWriteItem`` answer left unprocessed (call inside the mock)."""
    from moto.dynamodb.responses import DynamoHandler

    left: list[int] = []
    shimmed = DynamoHandler.batch_write_item

    def counted(self: Any) -> Any:
        answer = shimmed(self)
        left.append(sum(len(v) for v in answer.result["UnprocessedItems"].values()))
        return answer

    monkeypatch.setattr(DynamoHandler, "batch_write_item", counted)
    return left


def test_a_long_run_loses_no_item_when_batch_writes_come_back_unprocessed() -> None:
    with moto_backend(unprocessed_items=3), pytest.MonkeyPatch.context() as patch:
        left = count_unprocessed_answers(patch)
        env = moto_driver(workflows=[bulky_steps])
        run = env.trigger("ct.bulky_steps", {"n": 300}).id
        env.run_until_idle()

        done = env.get_run(run)
        assert (done.status, done.output) == ("completed", 300 * 3000)
        assert len([e for e in done.timeline if e.type == "step"]) == 300
        pages = boto3.client("dynamodb").query(
            TableName=SETTINGS.require("table_name"),
            KeyConditionExpression="#pk = :pk",
            ExpressionAttributeNames={"#pk": tables.PK},
            ExpressionAttributeValues={":pk": {"S": run}},
            ConsistentRead=True,
        )["Items"]
        assert len(pages) > 1  # the run's journal took page items, written in batches
        ttl = tables.TTL_ATTRIBUTE
        assert all(ttl in item for item in pages), "a page missed its expiry stamp"
        assert sum(1 for n in left if n) > 0, f"no batch write was ever left unprocessed: {left}"
