"""Per-step durability on the AWS driver (moto): the crash inside step 26 of 30, the log's
items and what a checkpoint costs."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from relayflow.adapters.aws import compression
from relayflow.adapters.aws.checkpoints import DynamoDBCheckpointLog, log_sk
from relayflow.adapters.aws.clients import AwsClients
from relayflow.adapters.aws.runstore import DynamoDBRunStore
from relayflow.dispatch.capabilities import CapabilitySigner
from relayflow.errors import CheckpointSlotTakenError
from relayflow.ports import RunQuery
from relayflow.protocol import CheckpointEntry, StepJournalEntry
from relayflow.sdk.registry import workflow
from relayflow.worker.checkpoint_client import HttpCheckpointLog
from tests.aws.moto_driver import SETTINGS, moto_driver
from tests.moto_support import moto_backend, use_fake_credentials
from tests.unit.durability.http_host_support import API_URL, SECRET, HttpHostedEnv
from tests.unit.durability.race_support import Takeover, check_race, race, run_race
from tests.unit.durability.test_durability_crash import Steps, per_step


@pytest.fixture
def on_moto(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    use_fake_credentials(monkeypatch)
    with moto_backend():
        yield


def test_a_crash_inside_step_26_reruns_only_step_26_on_aws(on_moto: None) -> None:
    steps = Steps(crash_at=26)
    env = moto_driver(workflows=[per_step], services={"steps": steps})
    run = env.trigger("dur.thirty")
    assert run.status == "running"
    recovered = env.recover(run.id)
    assert (recovered.status, recovered.output) == ("completed", sum(n * n for n in range(1, 31)))
    assert [steps.calls[n] for n in range(1, 31)] == [1] * 25 + [2] + [1] * 4
    kinds = [entry.kind for entry in env.checkpoints.read(run.id, 0)]
    assert kinds == ["step"] * 25 + ["fence"] + ["step"] * 4


def test_a_crash_inside_step_26_over_an_http_host_with_the_checkpoint_route_on_aws(
    on_moto: None,
) -> None:
    steps = Steps(crash_at=26)
    env = moto_driver(workflows=[per_step], services={"steps": steps})
    hosted = HttpHostedEnv(env, checkpoints=True, services={"steps": steps})
    run = env.trigger("dur.thirty")
    assert run.status == "running"  # the host died; the engine retries after its backoff
    env.run_until_idle()
    finished = env.get_run(run.id)
    assert (finished.status, finished.output) == ("completed", sum(n * n for n in range(1, 31)))
    assert [steps.calls[n] for n in range(1, 31)] == [1] * 25 + [2] + [1] * 4
    kinds = [entry.kind for entry in env.checkpoints.read(run.id, 0)]
    # An HTTP host claims each invocation's first slot before it runs anything.
    assert kinds == ["claim"] + ["step"] * 25 + ["fence", "claim"] + ["step"] * 4
    assert hosted.api_adapter.stored == 31


def test_the_checkpoint_route_tells_a_repeat_from_another_entry_on_aws(on_moto: None) -> None:
    env = moto_driver(workflows=[per_step], services={"steps": Steps(crash_at=None)})
    hosted = HttpHostedEnv(env, checkpoints=True, services={})
    signer = CapabilitySigner(SECRET, clock=hosted.clock_s)
    log = HttpCheckpointLog(
        f"{API_URL}/api/runs/r1/checkpoints",
        signer.grant("r1", 1, env.now() + 60_000),
        deadline_ms=env.now() + 60_000,
        session=hosted.api_session,
        now_ms=env.clock.now_ms,
    )
    step = StepJournalEntry(status="ok", kind="step", attempt=1, output={"n": 1.5, "s": "é"})
    entry = CheckpointEntry(seq=1, kind="step", key="s1", step=step)
    log.append("r1", entry)
    log.append("r1", entry)  # a repeat (its first answer lost): stored once, answered 200
    other = entry.model_copy(update={"key": "s2"})
    with pytest.raises(CheckpointSlotTakenError) as refused:
        log.append("r1", other)
    assert refused.value.taken == CheckpointEntry(seq=1, kind="step")
    assert env.checkpoints.read("r1", 0) == [entry]


def test_log_items_are_small_expire_and_refuse_a_taken_slot(on_moto: None) -> None:
    env = moto_driver(workflows=[per_step], services={"steps": Steps(crash_at=None)})
    run = env.trigger("dur.thirty")
    assert run.status == "completed"
    client = AwsClients(region="eu-west-1").dynamodb()
    item = client.get_item(
        TableName=SETTINGS.require("table_name"),
        Key={"pk": {"S": run.id}, "sk": {"S": log_sk(1)}},
    )["Item"]
    assert "expiresAt" in item
    log = env.checkpoints
    assert isinstance(log, DynamoDBCheckpointLog)
    with pytest.raises(CheckpointSlotTakenError) as refused:
        log.append(run.id, CheckpointEntry(seq=3, kind="fence"))
    taken = refused.value.taken
    assert isinstance(taken, CheckpointEntry)
    assert (taken.kind, taken.key) == ("step", "s3")
    assert isinstance(taken.step, StepJournalEntry) and taken.step.output == 9


def test_a_stored_group_leaves_out_fields_at_their_default_and_reads_back_whole(
    on_moto: None,
) -> None:
    env = moto_driver(workflows=[per_step], services={"steps": Steps(crash_at=None)})
    step = StepJournalEntry(
        status="ok", output={"n": 1}, started_at=5, finished_at=7, attempts=[], ordinal=0
    )
    members = [
        CheckpointEntry(seq=4, kind="step", key=key, step=step) for key in ("a/s", "branch:a")
    ]
    env.checkpoints.append("r2", CheckpointEntry(seq=4, kind="group", entries=members))
    client = AwsClients(region="eu-west-1").dynamodb()
    item = client.get_item(
        TableName=SETTINGS.require("table_name"), Key={"pk": {"S": "r2"}, "sk": {"S": log_sk(4)}}
    )["Item"]
    stored = compression.unpack(item["z"]["B"]).decode("utf-8")
    for default in ('"runtime"', '"compensate"', '"metadataUpdates"', '"attempt"'):
        assert default not in stored
    (read,) = env.checkpoints.read("r2", 3)
    assert read == CheckpointEntry(seq=4, kind="group", entries=members)
    assert read.entries is not None and read.entries[0].step is not None
    assert (read.entries[0].step.runtime, read.entries[0].step.attempt) == ("edge", 1)


def test_two_drivers_racing_one_run_never_interleave_on_aws(on_moto: None) -> None:
    steps = Takeover()
    env = moto_driver(workflows=[race], services={"steps": steps})
    run_id = run_race(env, steps)
    check_race(env, steps, run_id)


@workflow(id="dur.nap")
def nap(data: Any, ctx: Any) -> str:
    ctx.sleep("1h")
    return "rested"


def _index_attrs(run_id: str) -> dict[str, Any]:
    client = AwsClients(region="eu-west-1").dynamodb()
    item = client.get_item(
        TableName=SETTINGS.require("table_name"), Key={"pk": {"S": run_id}, "sk": {"S": "#run"}}
    )["Item"]
    return {k: v for k, v in item.items() if k in ("gStatus", "wakeAt")}


def test_waits_keep_index_entries_and_listings_still_filter_by_status(on_moto: None) -> None:
    env = moto_driver(workflows=[nap, per_step], services={"steps": Steps(crash_at=30)})
    napping = env.trigger("dur.nap").id
    crashed = env.trigger("dur.thirty").id  # its host died: running, leased
    done = env.trigger("dur.thirty").id
    assert _index_attrs(napping)["gStatus"] == {"S": "live"}
    assert _index_attrs(crashed)["gStatus"] == {"S": "live"}
    assert _index_attrs(done)["gStatus"] == {"S": "completed"}
    # A run saved while its driver runs an invocation keeps its wake entry; the sweeper
    # passes over a live lease (its header is due at the lease's end: no dirty mark) and
    # recovers the run once it expired.
    before = env.runs.get(crashed)
    assert before is not None and before.lease is not None
    assert env.sweep() == []
    unchanged = env.runs.get(crashed)
    assert unchanged is not None and (unchanged.version, unchanged.dirty) == (before.version, False)

    def ids(status: str) -> list[str]:
        found: list[str] = []
        cursor = None
        while True:
            page = env.runs.list_runs(RunQuery(statuses=(status,), limit=1, cursor=cursor))
            found += [r.id for r in page.runs]
            cursor = page.next_cursor
            if cursor is None:
                return found

    assert ids("waiting") == [napping]
    assert ids("running") == [crashed]
    assert ids("completed") == [done]
    by_workflow = env.runs.list_runs(RunQuery(workflow_id="dur.thirty", statuses=("running",)))
    assert [r.id for r in by_workflow.runs] == [crashed]
    env.advance("16m")  # the dead driver's lease expired
    env.sweep()
    assert env.get_run(crashed).status == "completed"


def test_reading_a_run_reads_none_of_its_checkpoint_log(on_moto: None) -> None:
    env = moto_driver(workflows=[per_step], services={"steps": Steps(crash_at=None)})
    run = env.trigger("dur.thirty")
    # Kept until they expire; the last step ends the body and the answer's save holds it.
    assert len(env.checkpoints.read(run.id, 0)) == 29
    client = AwsClients(region="eu-west-1").dynamodb()
    read: list[int] = []
    client.meta.events.register(
        "after-call.dynamodb.Query", lambda parsed, **_: read.append(parsed["ScannedCount"])
    )
    # A store that never saw the run (another function's) reads it from the table.
    found = DynamoDBRunStore.from_settings(SETTINGS, client_factory=lambda: client).get(run.id)

    assert found is not None and (found.status, found.output) == (
        "completed",
        sum(n * n for n in range(1, 31)),
    )
    assert read and sum(read) < 30, f"items read by each Query: {read}"
