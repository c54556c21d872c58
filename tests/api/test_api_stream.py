"""``GET /api/runs/{id}/stream``: numbered journal events after a cursor, as a long poll."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
from api_harness import READER, Api

from relayflow.api.stream import MAX_STREAM_WAIT_MS, RunStream, journal_feed
from relayflow.core.views import JournalEvent, RunDetail, TimelineEntry


def _ship(api: Api, order: str = "o-1") -> str:
    answer = api.post("/api/runs", {"workflowId": "api.ship", "input": {"id": order}})
    assert answer.status == 201, answer.body
    return str(answer.body["id"])


def test_the_first_read_answers_every_event_numbered_in_time_order(api: Api) -> None:
    run_id = _ship(api)

    answer = api.get(f"/api/runs/{run_id}/stream", token=READER)

    assert answer.status == 200
    body = answer.body
    assert body["runId"] == run_id and body["status"] == "waiting" and body["done"] is False
    events = body["events"]
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    assert body["next"] == len(events)
    assert [(e["type"], e["id"], e["status"]) for e in events] == [("wait", "sleep:0", "pending")]
    assert events[0]["kind"] == "DATETIME"
    assert [e["at"] for e in events] == sorted(e["at"] for e in events)


def test_a_cursor_answers_only_what_came_after_it(api: Api) -> None:
    run_id = _ship(api)
    first = api.get(f"/api/runs/{run_id}/stream").body
    api.env.advance("10m")
    api.env.run_until_idle()

    later = api.get(f"/api/runs/{run_id}/stream", query={"after": str(first["next"])}).body

    assert [(e["seq"], e["id"], e["status"]) for e in later["events"]] == [
        (2, "sleep:0", "resolved"),
        (3, "event:order.shipped:1", "pending"),
    ]
    assert later["next"] == 3
    nothing = api.get(f"/api/runs/{run_id}/stream", query={"after": "3"}).body
    assert nothing["events"] == [] and nothing["next"] == 3


def test_a_finished_run_ends_its_feed_with_its_status(api: Api) -> None:
    answer = api.post("/api/runs", {"workflowId": "api.fails"})
    run_id = answer.body["id"]

    body = api.get(f"/api/runs/{run_id}/stream", query={"waitMs": "5000"}).body

    assert body["done"] is True
    last = body["events"][-1]
    assert (last["type"], last["status"]) == ("status", "failed")
    assert last["error"]["code"] == "BROKEN"


def test_a_long_poll_answers_as_soon_as_the_run_changes(api: Api) -> None:
    """The memory run store notifies changes: the poll ends on the event, not at waitMs."""
    api.env.admin._sleep = lambda s: pytest.fail("a notifying store must not be polled")
    answer = api.post("/api/runs", {"workflowId": "api.signal"})
    run_id = answer.body["id"]
    after = api.get(f"/api/runs/{run_id}/stream").body["next"]
    api.context.remaining_ms = 600_000
    result: dict[str, Any] = {}
    started = threading.Event()

    def poll() -> None:
        started.set()
        result["answer"] = api.get(
            f"/api/runs/{run_id}/stream", query={"after": str(after), "waitMs": "20000"}
        )

    worker = threading.Thread(target=poll)
    worker.start()
    started.wait()
    delivered = api.post(f"/api/runs/{run_id}/signals", {"name": "go", "payload": 1})
    assert delivered.status == 200
    worker.join(timeout=15)
    assert not worker.is_alive(), "the long poll did not end on the change"
    body = result["answer"].body
    assert body["events"], body
    assert body["events"][0]["seq"] == after + 1
    assert ("wait", "resolved") in {(e["type"], e["status"]) for e in body["events"]}


def test_the_wait_is_capped_and_checked(api: Api) -> None:
    run_id = _ship(api)

    too_long = api.get(f"/api/runs/{run_id}/stream", query={"waitMs": str(MAX_STREAM_WAIT_MS + 1)})
    negative = api.get(f"/api/runs/{run_id}/stream", query={"after": "-1"})
    missing = api.get("/api/runs/nope/stream")
    anonymous = api.get(f"/api/runs/{run_id}/stream", token=None)

    assert too_long.status == 400 and too_long.body["error"] == "invalid_query"
    assert negative.status == 400
    assert missing.status == 404 and missing.body["error"] == "not_found"
    assert anonymous.status == 401


def test_the_wait_leaves_room_before_the_lambda_deadline(api: Api) -> None:
    run_id = _ship(api)
    after = api.get(f"/api/runs/{run_id}/stream").body["next"]
    api.context.remaining_ms = 1_000  # less than the margin: answer at once
    api.env.admin._sleep = lambda s: pytest.fail("no time was left to wait")

    body = api.get(
        f"/api/runs/{run_id}/stream", query={"after": str(after), "waitMs": "20000"}
    ).body

    assert body["events"] == [] and body["next"] == after


def test_the_route_is_in_the_openapi_document(api: Api) -> None:
    doc = api.get("/api/openapi.json", token=None).body
    operation = doc["paths"]["/api/runs/{run_id}/stream"]["get"]

    assert operation["operationId"] == "streamRun"
    names = {p["name"] for p in operation["parameters"]}
    assert {"run_id", "after", "waitMs"} <= names
    wait = next(p for p in operation["parameters"] if p["name"] == "waitMs")
    assert wait["schema"]["maximum"] == MAX_STREAM_WAIT_MS < 30_000


def _detail(**fields: Any) -> RunDetail:
    base: dict[str, Any] = {
        "id": "r1",
        "workflow_id": "w",
        "status": "running",
        "started_at": 1_000,
    }
    return RunDetail(**(base | fields))


def test_events_of_one_instant_follow_the_timeline() -> None:
    """A step that ends in the millisecond the next one starts comes before it."""
    run = _detail(
        timeline=[
            TimelineEntry(type="step", id="a", attempt=1, started_at=1_000, ended_at=1_005,
                          outcome="ok"),
            TimelineEntry(type="step", id="b", attempt=1, started_at=1_005, ended_at=1_005,
                          outcome="err"),
            TimelineEntry(type="step", id="b", attempt=2, started_at=1_010, outcome="started"),
        ]
    )  # fmt: skip

    feed = [(e.seq, e.id, e.attempt, e.status) for e in journal_feed(run)]

    assert feed == [
        (1, "a", 1, "started"),
        (2, "a", 1, "ok"),
        (3, "b", 1, "started"),
        (4, "b", 1, "err"),
        (5, "b", 2, "started"),
    ]


class _ScriptedAdmin:
    """An admin whose run changes while ``stream_run`` follows it."""

    def __init__(self, versions: list[RunDetail], changes: list[JournalEvent]) -> None:
        self.versions = versions
        self.changes = changes
        self.reads = 0
        self.follows: list[float | None] = []
        self.followed_to_the_end = False

    def get_run(self, run_id: str) -> RunDetail | None:
        run = self.versions[min(self.reads, len(self.versions) - 1)]
        self.reads += 1
        return run

    def stream_run(
        self, run_id: str, *, follow: bool = True, timeout_s: float | None = None
    ) -> Iterator[JournalEvent]:
        self.follows.append(timeout_s)
        yield from self.changes
        # Asked for more: the poll is still following once every change was seen.
        self.followed_to_the_end = True


def _status(status: str) -> JournalEvent:
    return JournalEvent(type="status", run_id="r1", at=1, status=status)


_PENDING_SLEEP = TimelineEntry(
    type="wait", id="sleep:0", kind="DATETIME", started_at=2, outcome="pending"
)


def test_the_poll_skips_what_the_caller_has_and_answers_the_feed_growing() -> None:
    quiet = _detail(status="waiting")
    grown = _detail(status="waiting", timeline=[_PENDING_SLEEP])
    # stream_run yields what exists first (the status already known), then the new wait.
    pending = JournalEvent(type="wait", run_id="r1", at=2, id="sleep:0", status="pending")
    admin = _ScriptedAdmin([quiet, grown], [_status("waiting"), pending])

    view = RunStream(admin).read("r1", 0, 2_500)

    assert admin.follows == [2.5] and not admin.followed_to_the_end
    assert [(e.seq, e.id, e.status) for e in view.events] == [(1, "sleep:0", "pending")]
    assert view.next == 1 and view.done is False


def test_a_change_of_status_alone_ends_the_poll() -> None:
    """A resumed run goes from running back to waiting on the wait it already had: no event
    is added, and a live view must still hear of it before the poll's time is up."""
    running = _detail(status="running", timeline=[_PENDING_SLEEP])
    waiting = _detail(status="waiting", timeline=[_PENDING_SLEEP])
    admin = _ScriptedAdmin([running, waiting], [_status("running"), _status("waiting")])

    view = RunStream(admin).read("r1", 1, 15_000)

    assert admin.follows == [15.0] and not admin.followed_to_the_end
    assert view.status == "waiting" and view.events == [] and view.next == 1


def test_a_status_other_than_the_caller_s_is_answered_at_once() -> None:
    """The status changed between the caller's last read and this request."""
    waiting = _detail(status="waiting", timeline=[_PENDING_SLEEP])
    admin = _ScriptedAdmin([waiting], [])

    view = RunStream(admin).read("r1", 1, 15_000, seen_status="running")
    again = RunStream(admin).read("r1", 1, 15_000, seen_status="waiting")

    assert admin.follows == [15.0], "only the caller that shows the run's status waits"
    assert view.status == again.status == "waiting" and view.events == []


def test_the_status_query_is_checked_and_answered(api: Api) -> None:
    answer = api.post("/api/runs", {"workflowId": "api.signal"})
    run_id = answer.body["id"]
    after = api.get(f"/api/runs/{run_id}/stream").body["next"]
    api.context.remaining_ms = 600_000
    api.env.admin._sleep = lambda s: pytest.fail("a status other than the caller's must not wait")

    body = api.get(
        f"/api/runs/{run_id}/stream",
        query={"after": str(after), "waitMs": "20000", "status": "running"},
    ).body
    unknown = api.get(f"/api/runs/{run_id}/stream", query={"status": "asleep"})

    assert body["status"] == "waiting" and body["events"] == [] and body["next"] == after
    assert unknown.status == 400 and unknown.body["error"] == "invalid_query"
