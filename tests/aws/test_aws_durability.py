"""Per-step durability on the AWS driver (moto): the crash inside step 26 of 30, the log's
items and what a checkpoint costs."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from relayflow.adapters.aws.checkpoints import DynamoDBCheckpointLog, log_sk
from relayflow.adapters.aws.clients import AwsClients
from relayflow.errors import CheckpointSlotTakenError
from relayflow.protocol import CheckpointEntry, StepJournalEntry
from tests.aws.moto_driver import SETTINGS, moto_driver
from tests.moto_support import moto_backend, use_fake_credentials, use_fast_transactions
from tests.unit.durability.test_durability_crash import Steps, per_step


@pytest.fixture
def on_moto(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    use_fake_credentials(monkeypatch)
    use_fast_transactions(monkeypatch)
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
    assert kinds == ["step"] * 25 + ["fence"] + ["step"] * 5


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
