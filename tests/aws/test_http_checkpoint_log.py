"""An HTTP host's checkpoint log: one POST per entry, retried only while its deadline allows,
a taken slot reported with the kind of entry in it, a refusal ending the checkpoints."""

from __future__ import annotations

import json
from typing import Any

import pytest
import requests
from test_http_dispatcher import ScriptedAdapter, Sleeps

from relayflow.dispatch.capabilities import CAPABILITY_HEADER
from relayflow.dispatch.http_dispatcher import TransportRetry
from relayflow.errors import CheckpointSlotTakenError, CheckpointUnavailableError
from relayflow.protocol import CheckpointEntry, MetadataUpdate
from relayflow.worker.checkpoint_client import HttpCheckpointLog

URL = "https://api.test/api/runs/r1/checkpoints"
NOW = 1_700_000_000_000
ENTRY = CheckpointEntry(
    seq=7, kind="metadata", metadata=MetadataUpdate(id="m1", op="set", key="stage", value="packed")
)
STORED = (200, {"runId": "r1", "seq": 7})


class Clock:
    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> int:
        return self.now


def log(
    script: list[Any], *, deadline_ms: int = NOW + 30_000, retries: int = 3
) -> tuple[HttpCheckpointLog, ScriptedAdapter, Sleeps, Clock]:
    adapter = ScriptedAdapter(script)
    session = requests.Session()
    session.mount("https://", adapter)
    sleeps, clock = Sleeps(), Clock()

    def sleep(seconds: float) -> None:
        sleeps(seconds)
        clock.now += int(seconds * 1000)

    retry = TransportRetry(retries=retries, sleep=sleep)
    http = HttpCheckpointLog(
        URL, "ckpt1.cap", deadline_ms=deadline_ms, session=session, retry=retry, now_ms=clock
    )
    return http, adapter, sleeps, clock


def test_an_entry_is_one_post_with_the_capability() -> None:
    http, adapter, sleeps, _ = log([STORED])
    http.append("r1", ENTRY)
    [sent] = adapter.sent
    assert (sent.method, sent.url) == ("POST", URL)
    assert sent.headers[CAPABILITY_HEADER] == "ckpt1.cap"
    assert CheckpointEntry.model_validate(json.loads(sent.body)) == ENTRY  # type: ignore[arg-type]
    assert sleeps.delays == []


@pytest.mark.parametrize(
    "failure",
    [requests.ReadTimeout("slow"), requests.ConnectionError("reset"), (503, {}), (429, {})],
)
def test_transient_failures_are_repeated_the_slot_makes_a_repeat_safe(failure: Any) -> None:
    http, adapter, sleeps, _ = log([failure, STORED])
    http.append("r1", ENTRY)
    assert len(adapter.sent) == 2
    assert adapter.sent[0].body == adapter.sent[1].body
    assert sleeps.delays == [0.2]


def test_timeouts_never_reach_past_the_deadline() -> None:
    http, adapter, _, _ = log([STORED], deadline_ms=NOW + 1_500)
    http.append("r1", ENTRY)
    assert adapter.timeouts == [(1.5, 1.5)]


def test_a_taken_slot_says_which_entry_is_in_it() -> None:
    taken = {"error": "checkpoint_slot_taken", "message": "taken"}
    cancel = {**taken, "details": {"kind": "cancel", "reason": "stop", "compensate": True}}
    http, _, _, _ = log([(409, cancel)])
    with pytest.raises(CheckpointSlotTakenError) as raised:
        http.append("r1", ENTRY)
    assert raised.value.taken == CheckpointEntry(
        seq=7, kind="cancel", reason="stop", compensate=True
    )
    http, _, _, _ = log([(409, taken)])
    with pytest.raises(CheckpointSlotTakenError) as raised:
        http.append("r1", ENTRY)
    assert raised.value.taken is None


@pytest.mark.parametrize("status", [400, 401, 403, 404, 409])
def test_a_refusal_is_not_repeated(status: int) -> None:
    http, adapter, _, _ = log([(status, {"error": "unauthorized", "message": "expired"})])
    with pytest.raises(CheckpointUnavailableError, match=f"HTTP {status} unauthorized"):
        http.append("r1", ENTRY)
    assert len(adapter.sent) == 1


def test_retries_stop_at_the_deadline() -> None:
    http, adapter, sleeps, _ = log([(503, {})] * 4, deadline_ms=NOW + 500, retries=3)
    with pytest.raises(CheckpointUnavailableError, match="HTTP 503"):
        http.append("r1", ENTRY)
    # 0.2 s, then 0.4 s would end past the deadline: two attempts, one wait.
    assert (len(adapter.sent), sleeps.delays) == (2, [0.2])


def test_nothing_is_sent_after_the_deadline() -> None:
    http, adapter, _, clock = log([STORED])
    clock.now = NOW + 30_000
    with pytest.raises(CheckpointUnavailableError, match="before the deadline"):
        http.append("r1", ENTRY)
    assert adapter.sent == []
