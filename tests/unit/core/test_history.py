"""The run's history as users read it: names of named operations, values on request, pages."""

from __future__ import annotations

from typing import Any

import pytest

from relayflow.core.views import (
    TIMELINE_VALUE_CAP_BYTES,
    TimelineEntry,
    cap_value,
    decode_timeline_cursor,
    timeline_page,
)
from relayflow.errors import FatalError, ValidationError
from relayflow.sdk import workflow
from relayflow.testing import WorkflowTestEnv


def _bump(state: int) -> tuple[bool, int]:
    return state + 1 >= 2, state + 1


@workflow(id="hist.named")
def named(data: Any, ctx: Any) -> Any:
    fetched = ctx.step("fetch", lambda: {"n": 1})
    approval = ctx.wait_for_token(name="approval")
    ctx.metadata.set("approval", approval.token_id)
    decision = approval.wait()
    carried = ctx.wait_for_callback(lambda token_id: None, name="carrier")
    polled = ctx.wait_for_condition(_bump, 0, delay="1s", name="poll")
    paid = ctx.group("checkout", lambda c: c.step("pay", lambda: "paid"))
    sides = ctx.parallel([lambda c: 1, lambda c: 2], names=["left", "right"])
    items = ctx.map(["a", "b"], lambda c, item, i: item.upper(), item_name=lambda x, i: f"it-{x}")
    shipped = ctx.wait_for_event("shipped", name="shipment")
    return [fetched, decision, carried, polled, paid, sides.results, items.results, shipped]


@workflow(id="hist.big")
def big(data: Any, ctx: Any) -> Any:
    ctx.step("huge", lambda: "x" * (TIMELINE_VALUE_CAP_BYTES + 1))
    for i in range(data["steps"]):
        ctx.step(f"s{i}", lambda i=i: i)
    return "done"


@workflow(id="hist.fails")
def fails(data: Any, ctx: Any) -> Any:
    def refuse() -> None:
        raise FatalError("no stock", code="NO_STOCK", data={"sku": "A1"})

    ctx.step("reserve", refuse)


def _finish_named(env: WorkflowTestEnv) -> str:
    run = env.trigger("hist.named", {})
    env.complete_token(env.get_run(run.id).metadata["approval"], {"ok": True})
    [carrier] = [
        e for e in env.get_run(run.id).timeline if e.name == "carrier" and e.type == "wait"
    ]
    assert carrier.token_id is not None
    env.complete_token(carrier.token_id, "truck")
    env.advance("5s")
    env.send_event(run.id, "shipped", {"box": 7})
    assert env.get_run(run.id).status == "completed"
    return run.id


def test_every_named_operation_carries_its_name() -> None:
    env = WorkflowTestEnv(workflows=[named])
    run_id = _finish_named(env)

    names = {(e.id, e.type): e.name for e in env.get_run(run_id).timeline if e.name}

    assert names == {
        ("token:tok_0", "step"): "approval",
        ("token:tok_0", "wait"): "approval",
        ("token:tok_1", "step"): "carrier",
        ("callback:tok_1", "step"): "carrier",
        ("token:tok_1", "wait"): "carrier",
        ("condition:poll", "step"): "poll",
        ("group:checkout", "step"): "checkout",
        ("branch:p0.left", "step"): "left",
        ("branch:p0.right", "step"): "right",
        ("branch:m1.it-a", "step"): "it-a",
        ("branch:m1.it-b", "step"): "it-b",
        ("event:shipped:2", "wait"): "shipment",
    }


def test_values_are_given_only_on_request() -> None:
    env = WorkflowTestEnv(workflows=[named])
    run_id = _finish_named(env)

    plain = env.get_run(run_id).timeline
    valued = {(e.id, e.type): e for e in env.get_run(run_id, values=True).timeline}

    assert all(e.value_size is None and e.value is None for e in plain)
    assert valued[("fetch", "step")].value == {"n": 1}
    assert valued[("token:tok_0", "wait")].value == {"ok": True}
    assert valued[("token:tok_1", "wait")].value == "truck"
    assert valued[("condition:poll", "step")].value == {"state": 2, "polls": 2}
    assert valued[("group:checkout", "step")].value == "paid"
    assert valued[("batch:p0", "step")].value["results"] == [1, 2]
    assert valued[("event:shipped:2", "wait")].value == {"box": 7}
    assert valued[("fetch", "step")].value_size == len('{"n":1}')
    assert valued[("fetch", "step")].value_truncated is False


def test_an_error_entry_carries_the_error_data_as_its_value() -> None:
    env = WorkflowTestEnv(workflows=[fails])
    run = env.trigger("hist.fails", {})

    [entry] = [e for e in env.get_run(run.id, values=True).timeline if e.id == "reserve"]

    assert entry.outcome == "err"
    assert entry.value == {"sku": "A1"}


def test_stream_run_events_carry_names_and_values_on_request() -> None:
    env = WorkflowTestEnv(workflows=[named])
    run_id = _finish_named(env)

    plain = {(e.type, e.id): e.data for e in env.stream_run(run_id)}
    valued = {(e.type, e.id): e.data for e in env.stream_run(run_id, values=True)}

    assert plain[("wait", "token:tok_0")]["name"] == "approval"
    assert plain[("wait", "token:tok_0")]["tokenId"].startswith("rft1.")
    assert "value" not in plain[("wait", "token:tok_0")]
    assert valued[("wait", "token:tok_0")]["value"] == {"ok": True}
    assert valued[("step", "branch:p0.left")] == {
        "kind": "branch",
        "name": "left",
        "value": 1,
        "valueSize": 1,
        "valueTruncated": False,
    }


def test_a_value_over_the_cap_is_left_out_and_sized() -> None:
    env = WorkflowTestEnv(workflows=[big])
    run = env.trigger("hist.big", {"steps": 0})

    [huge] = [e for e in env.get_run(run.id, values=True).timeline if e.id == "huge"]

    assert (huge.value, huge.value_truncated) == (None, True)
    assert huge.value_size == TIMELINE_VALUE_CAP_BYTES + 3  # the JSON string's quotes


def test_a_pointer_over_the_cap_is_never_fetched() -> None:
    fetched: list[Any] = []
    pointer = {"$relayflowPayload": "s3://b/k", "size": TIMELINE_VALUE_CAP_BYTES * 4}
    entry = TimelineEntry(type="step", id="s", started_at=0, outcome="ok", value=pointer)

    capped = cap_value(entry, resolve=fetched.append)

    assert (capped.value, capped.value_size, capped.value_truncated) == (
        None,
        TIMELINE_VALUE_CAP_BYTES * 4,
        True,
    )
    assert fetched == []


def test_pages_follow_cursors_to_the_end_without_gaps_or_repeats() -> None:
    env = WorkflowTestEnv(workflows=[big])
    run = env.trigger("hist.big", {"steps": 25})
    every = [(e.id, e.attempt) for e in env.get_run(run.id).timeline]

    seen: list[tuple[str, int | None]] = []
    cursor = None
    pages = 0
    while True:
        page = env.admin.timeline(run.id, cursor=cursor, limit=10)
        seen.extend((e.id, e.attempt) for e in page.entries)
        pages += 1
        cursor = page.next_cursor
        if cursor is None:
            break

    assert seen == every
    assert pages == 3


def test_a_page_with_values_stops_at_its_byte_budget() -> None:
    env = WorkflowTestEnv(workflows=[big])
    run = env.trigger("hist.big", {"steps": 30})
    record = env.runs.get(run.id)
    assert record is not None

    page = timeline_page(record, values=True, limit=1000, budget=5)

    # "huge" is left out (it costs nothing); then the values 0..4, one byte each, fill the
    # 5-byte budget and the sixth value starts the next page.
    assert [e.id for e in page.entries] == ["huge", "s0", "s1", "s2", "s3", "s4"]
    assert page.next_cursor is not None
    assert decode_timeline_cursor(page.next_cursor) == len(page.entries)


@pytest.mark.parametrize("cursor", ["nope", "eyJvIjotMX0", "WzFd"])
def test_bad_timeline_cursors_are_refused(cursor: str) -> None:
    with pytest.raises(ValidationError):
        decode_timeline_cursor(cursor)


def test_a_run_s_timeline_is_built_when_first_read(monkeypatch: pytest.MonkeyPatch) -> None:
    import relayflow.core.views as views

    built: list[str] = []
    real_timeline = views.timeline

    def counted(record: Any, **options: Any) -> list[TimelineEntry]:
        built.append(record.id)
        return real_timeline(record, **options)

    monkeypatch.setattr(views, "timeline", counted)
    env = WorkflowTestEnv(workflows=[big])
    run = env.trigger("hist.big", {"steps": 3})
    detail = env.get_run(run.id)
    assert built == []  # neither the trigger's answer nor get_run built it
    first = [(e.type, e.id, e.outcome) for e in detail.timeline]
    assert first == [("step", "huge", "ok"), *[("step", f"s{i}", "ok") for i in range(3)]]
    assert detail.model_dump()["timeline"][0]["id"] == "huge"
    assert built == [run.id]  # once, then kept
    again = views.RunDetail(**detail.model_dump(exclude={"timeline"}), timeline=detail.timeline)
    assert again.timeline == detail.timeline and built == [run.id]
