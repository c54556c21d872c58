"""A branch's end stored inside its last step's entry: in checkpoint groups and run pages the
branch entry a map item or parallel branch ends with is folded into its step's entry, reads
back exactly as written, and a map's results replay from it after the run wakes."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from run_store_support import TABLE, FixedClock, fresh_get, new_record, noise, page_items

from relayflow.adapters.aws import branch_ends, compression, tables
from relayflow.adapters.aws.checkpoints import DynamoDBCheckpointLog, log_sk
from relayflow.adapters.aws.clients import AwsClients
from relayflow.adapters.aws.runstore import DynamoDBRunStore
from relayflow.config import Settings
from relayflow.core.record import RunRecord
from relayflow.protocol import CheckpointEntry, StepAttempt, StepJournalEntry
from relayflow.sdk.registry import workflow
from tests.aws.moto_driver import SETTINGS, moto_driver
from tests.moto_support import use_fake_credentials

# ---- the fold itself ------------------------------------------------------------------------

_KEYS = ["m0.0/work", "m0.1/work", "branch:m0.0", "branch:m0.1", "p0.a/m1.x/s", "p0.a/branch:m1.x"]
_KEYS += ["branch:p0.a", "top"]
_VALUES = st.one_of(
    st.integers(-2, 2),
    st.sampled_from([0.0, -0.0, 1.0]),
    st.booleans(),
    st.none(),
    st.text(max_size=2),
)
_OUTPUTS = st.one_of(
    _VALUES,
    st.lists(_VALUES, max_size=2),
    st.dictionaries(st.text(max_size=1), _VALUES, max_size=2),
)


@st.composite
def _entry(draw: st.DrawFn) -> tuple[str, dict[str, Any]]:
    key = draw(st.sampled_from(_KEYS))
    value: dict[str, Any] = {"status": draw(st.sampled_from(["ok", "err"]))}
    for field in ("output", "error", "startedAt", "finishedAt", "ordinal"):
        if draw(st.booleans()):
            value[field] = draw(_OUTPUTS if field in ("output", "error") else st.integers(0, 2))
    if draw(st.booleans()):
        value["kind"] = "branch"
        if draw(st.booleans()):
            value["name"] = draw(st.sampled_from(["0", "1", "x", "a"]))
    return key, value


def _applied(entries: list[tuple[str, Any]]) -> dict[str, str]:
    """Each key's final value (later entries win), as canonical JSON."""
    return {key: json.dumps(value, sort_keys=True) for key, value in entries}


@given(st.lists(_entry(), max_size=12))
def test_folded_entries_apply_to_exactly_what_the_entries_did(
    entries: list[tuple[str, dict[str, Any]]],
) -> None:
    written = _fold([(key, dict(value)) for key, value in entries])
    stored = [(key, json.loads(json.dumps(value))) for key, value in written]
    read = [pair for key, value in stored for pair in branch_ends.unfold(key, value)]
    assert _applied(read) == _applied(entries)


def _step(output: Any, **fields: Any) -> dict[str, Any]:
    return {"status": "ok", "output": output, "startedAt": 5, "finishedAt": 7, **fields}


def _fold(entries: list[tuple[str, dict[str, Any]]]) -> list[tuple[str, dict[str, Any]]]:
    return branch_ends.fold(
        entries,
        key=lambda entry: entry[0],
        value=lambda entry: entry[1],
        carrying=lambda entry, end: (entry[0], {**entry[1], branch_ends.END: end}),
    )


def test_a_branch_that_ends_with_its_step_output_is_carried_whole() -> None:
    step = _step({"n": 1}, ordinal=0, attempts=[{"attempt": 1}])
    branch = _step({"n": 1}, kind="branch", name="1", ordinal=3)
    folded = _fold([("m0.1/work", step), ("m0.2/work", _step(2)), ("branch:m0.1", branch)])
    assert folded == [
        ("m0.1/work", {**step, branch_ends.END: {"ordinal": 3}}),
        ("m0.2/work", _step(2)),
    ]
    assert list(branch_ends.unfold("m0.1/work", dict(folded[0][1]))) == [
        ("m0.1/work", step),
        ("branch:m0.1", branch),
    ]


def _as_json(entries: list[tuple[str, Any]]) -> list[tuple[str, str]]:
    return [(key, json.dumps(value, sort_keys=True)) for key, value in entries]


def test_what_the_step_does_not_give_is_carried_in_the_end() -> None:
    step = _step(1)
    for branch in (
        _step(True, kind="branch", name="1"),  # true is not 1
        _step(1.0, kind="branch", name="1"),
        {**_step(1, kind="branch", name="1"), "finishedAt": 7.0},
        _step(1, kind="branch", name="one"),
        {**_step(1, kind="branch", name="1"), "startedAt": 4, "error": None},
    ):
        ((key, value),) = _fold([("m0.1/work", dict(step)), ("branch:m0.1", branch)])
        read = list(branch_ends.unfold(key, json.loads(json.dumps(value))))
        assert _as_json(read) == _as_json([("m0.1/work", step), ("branch:m0.1", branch)])
    zero, negative_zero = _step(0.0), _step(-0.0, kind="branch", name="1")
    ((key, value),) = _fold([("m0.1/work", dict(zero)), ("branch:m0.1", negative_zero)])
    assert value[branch_ends.END] == {"output": -0.0}
    assert str(list(branch_ends.unfold(key, value))[1][1]["output"]) == "-0.0"


def test_a_branch_without_a_field_its_step_gives_is_written_apart() -> None:
    entries = [("m0.1/work", _step(1)), ("branch:m0.1", {"status": "ok", "kind": "branch"})]
    assert _fold(entries) == entries


def test_an_entry_of_the_branch_between_them_keeps_the_branch_apart() -> None:
    entries = [
        ("m0.1/work", _step(1)),
        ("branch:m0.1", _step(0, kind="branch", name="1", status="err")),
        ("branch:m0.1", _step(1, kind="branch", name="1")),
    ]
    carried = {branch_ends.END: {"output": 0, "status": "err"}}
    assert _fold(entries) == [("m0.1/work", {**_step(1), **carried}), entries[2]]


# ---- in DynamoDB ----------------------------------------------------------------------------


@pytest.fixture
def clients(aws: None) -> Iterator[AwsClients]:
    built = AwsClients(region="eu-west-1")
    tables.create_resources(built, Settings(table_name=TABLE))
    yield built


def _journal_step(output: Any, **fields: Any) -> StepJournalEntry:
    return StepJournalEntry(status="ok", output=output, started_at=5, finished_at=7, **fields)


def _output(i: int) -> dict[str, Any]:
    return {"i": i, "data": noise(i, 100)}


def _map_entries(items: int) -> list[tuple[str, StepJournalEntry]]:
    """A map's entries as a grouped run writes them: each item's step (100 bytes of output),
    then its branch's end. The even items' branches return the step's output, the odd ones a
    value of their own; item 3's branch has no start time (one the step cannot give)."""
    entries: list[tuple[str, StepJournalEntry]] = []
    for i in range(items):
        attempt = StepAttempt(attempt=1, status="ok", started_at=5, finished_at=7)
        entries.append((f"m0.{i}/work", _journal_step(_output(i), attempts=[attempt], ordinal=0)))
    for i in range(items):
        result = _output(i) if i % 2 == 0 else i
        branch = _journal_step(result, kind="branch", name=str(i), ordinal=0)
        if i == 3:
            branch = branch.model_copy(update={"started_at": 0})
        entries.append((f"branch:m0.{i}", branch))
    return entries


def test_a_group_stores_each_branch_end_in_its_step_entry_and_reads_back_whole(
    clients: AwsClients,
) -> None:
    log = DynamoDBCheckpointLog(TABLE, client_factory=clients.dynamodb)
    members = [
        CheckpointEntry(seq=4, kind="step", key=key, step=entry) for key, entry in _map_entries(4)
    ]
    log.append("r1", CheckpointEntry(seq=4, kind="group", entries=members))
    item = clients.dynamodb().get_item(
        TableName=TABLE, Key={"pk": {"S": "r1"}, "sk": {"S": log_sk(4)}}
    )["Item"]
    stored = json.loads(compression.unpack(item["z"]["B"]))["entries"]
    assert [entry["key"] for entry in stored] == [
        *(f"m0.{i}/work" for i in range(4)),
        "branch:m0.3",
    ]
    ends = [entry["step"].get(branch_ends.END) for entry in stored]
    assert ends == [{}, {"output": 1}, {}, None, None]
    (read,) = log.read("r1", 3)
    assert read.entries is not None
    assert {e.key: e for e in read.entries} == {e.key: e for e in members}


def test_a_run_s_pages_store_each_branch_end_in_its_step_entry(clients: AwsClients) -> None:
    store = DynamoDBRunStore(TABLE, client_factory=clients.dynamodb, clock=FixedClock())
    record = store.try_insert(new_record())
    journal = record.journal.model_copy(update={"step_results": dict(_map_entries(40))})
    saved = store.save(record.model_copy(update={"journal": journal}), expected_version=1)
    pages = page_items(clients, "run-1")
    assert pages, "forty items take a page"
    stored = [e for page in pages for e in json.loads(compression.unpack(page["z"]["B"]))]
    steps = [entry for entry in stored if entry[0] == "step"]
    assert len(steps) == 41, "each item's step entry, and item 3's branch apart"
    assert sum(branch_ends.END in entry[2] for entry in steps) == 39
    read = fresh_get(clients)
    assert isinstance(read, RunRecord) and read == saved


# ---- a map replayed from them ---------------------------------------------------------------


async def _double(n: int) -> int:
    return n * 2


async def _item(ctx: Any, n: int, _index: int) -> Any:
    doubled = await ctx.step("double", _double, n)
    return doubled if n % 2 else {"doubled": doubled}


@workflow(id="ends.map_then_sleep")
async def map_then_sleep(data: Any, ctx: Any) -> Any:
    done = await ctx.map(list(range(6)), _item, max_concurrency=6)
    await ctx.sleep("1m")
    return done.results


def test_a_map_s_results_replay_from_the_folded_entries_after_the_run_wakes(
    aws: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    use_fake_credentials(monkeypatch)
    env = moto_driver(workflows=[map_then_sleep])
    run = env.trigger("ends.map_then_sleep")
    assert run.status == "waiting"
    items = (
        AwsClients(region="eu-west-1")
        .dynamodb()
        .query(
            TableName=SETTINGS.require("table_name"),
            KeyConditionExpression="pk = :pk",
            ExpressionAttributeValues={":pk": {"S": run.id}},
        )["Items"]
    )
    blobs = [i["z"]["B"] for i in items if i["sk"]["S"].startswith("g#")]
    blobs += [i["i"]["B"] for i in items if i["sk"]["S"] == "#run" and "i" in i]
    stored = [e for blob in blobs for e in json.loads(compression.unpack(blob))]
    ends = {e[1]: e[2].get(branch_ends.END) for e in stored if e[0] == "step"}
    assert ends == {
        **{f"m0.{i}/double": {"output": {"doubled": 2 * i}} for i in (0, 2, 4)},
        **{f"m0.{i}/double": {} for i in (1, 3, 5)},
        "batch:m0": None,
    }, "every branch ends in its step's entry, with the result when it is not the step's"
    env.run_until_idle()
    done = env.get_run(run.id)
    assert (done.status, done.output) == (
        "completed",
        [{"doubled": 0}, 2, {"doubled": 4}, 6, {"doubled": 8}, 10],
    )
