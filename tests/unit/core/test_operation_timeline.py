"""What operators did to a run, as its timeline, journal events and stream feed show it:
action entries, top-level steps, and the attempts a redrive took out of the journal."""

from __future__ import annotations

from relayflow.api.stream import journal_feed
from relayflow.core.record import Redrive, RunAction, RunRecord
from relayflow.core.views import detail, journal_events, timeline
from relayflow.protocol import Journal, SerializedError, StepAttempt, StepJournalEntry

T0 = 1_700_000_000_000
BANK_DOWN = SerializedError(code="UNKNOWN", message="the bank is down")


def _record() -> RunRecord:
    """A run whose ``charge`` failed, was redriven once and succeeded; paused and resumed
    on the way. ``checkout/pay`` sits inside a group."""
    failed = StepJournalEntry(
        status="err",
        error=BANK_DOWN,
        started_at=T0 + 10,
        finished_at=T0 + 20,
        attempts=[StepAttempt(attempt=1, status="err", started_at=T0 + 10, finished_at=T0 + 20)],
    )
    journal = Journal(
        step_results={
            "charge": StepJournalEntry(
                status="ok",
                output={"charged": True},
                started_at=T0 + 500,
                finished_at=T0 + 510,
                attempts=[
                    StepAttempt(attempt=1, status="ok", started_at=T0 + 500, finished_at=T0 + 510)
                ],
            ),
            "checkout": StepJournalEntry(
                status="ok", kind="group", started_at=T0 + 600, finished_at=T0 + 620
            ),
            "checkout/pay": StepJournalEntry(
                status="ok", started_at=T0 + 601, finished_at=T0 + 610
            ),
        }
    )
    return RunRecord(
        id="run_ops",
        workflow_id="ops.flaky",
        status="completed",
        started_at=T0,
        completed_at=T0 + 700,
        journal=journal,
        actions=[
            RunAction(id="k-1", kind="redrive", by="ops-alice", at=T0 + 400, reason="back"),
            RunAction(id="k-2", kind="pause", by="oncall-bob", at=T0 + 520),
            RunAction(id="k-3", kind="resume", by="oncall-bob", at=T0 + 550),
        ],
        redrives=[Redrive(at=T0 + 400, action_id="k-1", error=BANK_DOWN, steps={"charge": failed})],
    )


def test_actions_are_entries_of_their_own_in_time_order() -> None:
    entries = timeline(_record())

    actions = [(e.kind, e.id, e.by, e.reason, e.started_at) for e in entries if e.type == "action"]
    assert actions == [
        ("redrive", "k-1", "ops-alice", "back", T0 + 400),
        ("pause", "k-2", "oncall-bob", None, T0 + 520),
        ("resume", "k-3", "oncall-bob", None, T0 + 550),
    ]
    assert all(e.outcome == "applied" for e in entries if e.type == "action")
    order = [(e.type, e.id) for e in entries]
    assert order.index(("action", "k-1")) < order.index(("step", "charge"), 1)


def test_only_steps_of_the_body_itself_are_top_level() -> None:
    entries = timeline(_record())

    top = {e.id: e.top_level for e in entries if e.type == "step"}
    assert top == {"charge": True, "checkout": True, "checkout/pay": False}
    assert {e.top_level for e in entries if e.type == "action"} == {None}


def test_a_redrive_s_removed_attempts_stay_in_the_timeline_marked() -> None:
    steps = [
        (e.id, e.attempt, e.outcome, e.redrive) for e in timeline(_record()) if e.id == "charge"
    ]

    assert steps == [("charge", 1, "err", 1), ("charge", 1, "ok", None)]


def test_journal_events_carry_actions_but_not_the_removed_attempts() -> None:
    events = journal_events(_record())

    charge = [(e.attempt, e.status) for e in events if e.id == "charge"]
    assert charge == [(1, "ok")]
    [pause] = [e for e in events if e.type == "action" and e.id == "k-2"]
    assert pause.status == "applied"
    assert pause.data == {"kind": "pause", "by": "oncall-bob", "reason": None, "detail": {}}


def test_the_stream_gives_one_event_per_action_and_keeps_its_numbering() -> None:
    record = _record()

    feed = journal_feed(detail(record))

    actions = [(e.kind, e.status, e.data["by"]) for e in feed if e.type == "action"]
    assert actions == [
        ("redrive", "applied", "ops-alice"),
        ("pause", "applied", "oncall-bob"),
        ("resume", "applied", "oncall-bob"),
    ]
    # The removed attempt keeps its place: the seqs a client has seen do not move.
    first = feed[0]
    assert (first.type, first.id, first.status) == ("step", "charge", "started")


def test_the_detail_carries_what_operators_did() -> None:
    view = detail(_record())

    assert [a.id for a in view.actions] == ["k-1", "k-2", "k-3"]
    assert view.redrive_count == 1 and list(view.redrives[0].steps) == ["charge"]
    assert view.pause is None and view.rerun_of is None and view.reruns == []


def test_a_failed_attempt_waiting_for_its_retry_reads_retrying_not_failed() -> None:
    def attempt(n: int) -> StepAttempt:
        at = T0 + 100 * n
        return StepAttempt(
            attempt=n, status="err", started_at=at, finished_at=at + 5, error=BANK_DOWN
        )

    waiting = StepJournalEntry(
        status="retrying", attempt=2, started_at=T0 + 100, attempts=[attempt(1), attempt(2)]
    )
    failed = StepJournalEntry(
        status="err",
        error=BANK_DOWN,
        attempt=2,
        started_at=T0 + 100,
        finished_at=T0 + 205,
        attempts=[attempt(1), attempt(2)],
    )
    for entry, outcomes in ((waiting, ["err", "retrying"]), (failed, ["err", "err"])):
        record = RunRecord(
            id="run_retry",
            workflow_id="ops.flaky",
            status="waiting",
            started_at=T0,
            journal=Journal(step_results={"charge": entry}),
        )
        assert [e.outcome for e in timeline(record) if e.type == "step"] == outcomes
