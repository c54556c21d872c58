"""A redrive brings a finished run back within its retention window: the save that revives
it takes the expiry off every item of the run (header, pages, delivery ids) first."""

from __future__ import annotations

from typing import Any

from moto_driver import SETTINGS

from relayflow.adapters.aws import tables
from relayflow.adapters.aws.clients import AwsClients
from relayflow.adapters.aws.wiring import build_aws_driver
from relayflow.clock import VirtualClock
from relayflow.sdk.registry import workflow
from relayflow.sdk.retry import RetryPolicy

T0 = 1_767_225_600_000
OUTAGE = {"on": True}


def _fetch(n: int) -> str:
    if n == 119 and OUTAGE["on"]:
        raise ConnectionError("downstream unavailable")
    return "x" * 2_000


@workflow(id="aws.redrive.long", retry=RetryPolicy(max=1))
def long_run(data: Any, ctx: Any) -> int:
    ctx.wait_for_event("go")
    done = len([ctx.step(f"s{n}", _fetch, n) for n in range(120)])
    ctx.wait_for_event("done")
    return done


def _items(clients: AwsClients, run_id: str) -> list[dict[str, Any]]:
    """The run's header, pages and delivery ids (its checkpoint log expires on its own)."""
    items: list[dict[str, Any]] = []
    for partition in (run_id, f"#delivery#run:{run_id}"):
        answer = clients.dynamodb().query(
            TableName=SETTINGS.table_name,
            KeyConditionExpression="pk = :pk",
            ExpressionAttributeValues={":pk": {"S": partition}},
            ConsistentRead=True,
        )
        items += [i for i in answer["Items"] if not i["sk"]["S"].startswith("log#")]
    return items


def test_redrive_takes_the_expiry_off_every_item_of_the_run(aws: None) -> None:
    clients = AwsClients(region="eu-west-1")
    tables.create_resources(clients, SETTINGS)
    clock = VirtualClock(T0)
    driver = build_aws_driver(SETTINGS, clients=clients, clock=clock, on_due=lambda r, at: None)
    driver.trigger("aws.redrive.long", None, run_id="long-1")
    driver.send_event("long-1", "go", 1, event_id="go-1")
    assert driver.admin.get_run("long-1").status == "failed"
    ended = _items(clients, "long-1")
    assert any(i["sk"]["S"].startswith("g#") for i in ended), "the run has pages"
    assert any(i["sk"]["S"] == "EVENT:go-1" for i in ended), "and a delivery id"
    assert all("expiresAt" in i for i in ended)

    clock.advance(86_400_000)
    OUTAGE["on"] = False
    try:
        redriven = driver.admin.redrive_run("long-1", by="oncall")
    finally:
        OUTAGE["on"] = True
    assert redriven.status == "waiting"
    assert redriven.redrive_count == 1
    live = _items(clients, "long-1")
    assert [i["sk"]["S"] for i in live if "expiresAt" in i] == [], "nothing expires while live"

    driver.send_event("long-1", "done", 1, event_id="done-1")
    finished = driver.admin.get_run("long-1")
    assert (finished.status, finished.output) == ("completed", 120)
    again = _items(clients, "long-1")
    header = next(i for i in again if i["sk"]["S"] == "#run")
    assert {i["expiresAt"]["N"] for i in again} == {header["expiresAt"]["N"]}
    assert int(header["expiresAt"]["N"]) > int(ended[0]["expiresAt"]["N"])
