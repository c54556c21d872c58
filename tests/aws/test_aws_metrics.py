"""What the drive function prints as CloudWatch EMF when it drives a run on AWS (moto): the
metric names, units, values and dimensions the deployment's dashboard graphs."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from relayflow import RetryPolicy
from relayflow.api import metrics as m
from relayflow.config import Settings
from relayflow.drive.handlers import make_drive_handler, make_sweeper_handler
from relayflow.sdk.registry import workflow
from tests.api.apigw import FakeLambdaContext
from tests.aws.moto_driver import moto_driver
from tests.moto_support import moto_backend, use_fake_credentials

LATE_MS = 250
calls: list[int] = []


def fails_once() -> str:
    calls.append(1)
    if len(calls) == 1:
        raise RuntimeError("not yet")
    return "ok"


@workflow(id="metrics.on_aws", retry=RetryPolicy(max=3, backoff="fixed", initial="30s"))
def retried_then_sleeps(data: Any, ctx: Any) -> str:
    result = str(ctx.step("flaky", fails_once))
    ctx.sleep("1m")
    return result


@pytest.fixture
def on_moto(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    use_fake_credentials(monkeypatch)
    with moto_backend():
        yield


def emf_lines(out: str) -> list[dict[str, Any]]:
    """The EMF documents among the printed lines."""
    lines = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    return [line for line in lines if "_aws" in line]


def test_a_drive_on_aws_prints_per_workflow_metrics_as_emf(
    on_moto: None, capsys: pytest.CaptureFixture[str]
) -> None:
    calls.clear()
    env = moto_driver(workflows=[retried_then_sleeps])
    drive = make_drive_handler(
        lambda: env.driver, settings=lambda: Settings(deployment_name="prod")
    )
    run = env.trigger("metrics.on_aws", {})
    assert run.status == "waiting", "the first attempt failed and waits for its retry"
    capsys.readouterr()

    for _ in range(2):  # the retry's alarm, then the sleep's; each fires late
        wake_at = env.alarms.armed(run.id)
        assert wake_at is not None
        env.clock.set(wake_at + LATE_MS)
        drive({"runId": run.id, "wakeAt": wake_at}, FakeLambdaContext())

    assert env.get_run(run.id).status == "completed"
    documents = emf_lines(capsys.readouterr().out)
    per_workflow = [doc for doc in documents if doc.get(m.WORKFLOW_DIMENSION) == "metrics.on_aws"]
    assert per_workflow, f"no EMF line for the workflow in {documents}"
    for doc in per_workflow:
        (directive,) = doc["_aws"]["CloudWatchMetrics"]
        assert directive["Namespace"] == m.NAMESPACE
        assert [sorted(names) for names in directive["Dimensions"]] == [
            [m.ENVIRONMENT_DIMENSION, "service", m.WORKFLOW_DIMENSION]
        ]
        assert (doc["service"], doc[m.ENVIRONMENT_DIMENSION]) == ("relayflow-drive", "prod")
        assert "runId" not in doc and run.id not in json.dumps(directive)
    values = _values(per_workflow)
    assert values[m.STEPS_ATTEMPTS] == [1], "the second attempt, driven by the retry's alarm"
    assert values[m.STEPS_RETRIED] == [1]
    assert values[m.RUNS_COMPLETED] == [1]
    assert values[m.ALARMS_LATENESS] == [LATE_MS, LATE_MS]
    units = _units(per_workflow)
    assert units[m.ALARMS_LATENESS] == "Milliseconds"
    assert units[m.RUNS_COMPLETED] == "Count"
    deployment = [doc for doc in documents if m.WORKFLOW_DIMENSION not in doc]
    assert sum(_flat(_values(deployment).get(m.ALARMS_FIRED, []))) == 2


def _values(documents: list[dict[str, Any]]) -> dict[str, list[float]]:
    """Each metric's values over ``documents`` (a name holds one value or a list)."""
    found: dict[str, list[float]] = {}
    for doc in documents:
        for metric in doc["_aws"]["CloudWatchMetrics"][0]["Metrics"]:
            value = doc[metric["Name"]]
            found.setdefault(metric["Name"], []).extend(_flat(value))
    return found


def _units(documents: list[dict[str, Any]]) -> dict[str, str]:
    return {
        metric["Name"]: metric["Unit"]
        for doc in documents
        for metric in doc["_aws"]["CloudWatchMetrics"][0]["Metrics"]
    }


def _flat(value: Any) -> list[float]:
    return [float(v) for v in value] if isinstance(value, list) else [float(value)]


@workflow(id="metrics.sleeper")
def sleeps(data: Any, ctx: Any) -> str:
    ctx.sleep("1m")
    return "woke"


def test_the_sweeper_measures_how_late_it_drove_a_run_whose_alarm_was_missed(
    on_moto: None, capsys: pytest.CaptureFixture[str]
) -> None:
    env = moto_driver(workflows=[sleeps])
    sweep = make_sweeper_handler(
        lambda: env.driver, settings=lambda: Settings(deployment_name="prod")
    )
    run = env.trigger("metrics.sleeper", {})
    wake_at = env.alarms.armed(run.id)
    assert wake_at is not None
    missed_by_ms = 90_000
    env.clock.set(wake_at + missed_by_ms)  # its alarm never fired; the sweeper finds it
    capsys.readouterr()

    assert sweep({}, FakeLambdaContext())["swept"] == [run.id]

    assert env.get_run(run.id).status == "completed"
    documents = emf_lines(capsys.readouterr().out)
    per_workflow = [doc for doc in documents if doc.get(m.WORKFLOW_DIMENSION) == "metrics.sleeper"]
    assert {doc["service"] for doc in per_workflow} == {"relayflow-sweeper"}
    values = _values(per_workflow)
    assert values[m.ALARMS_LATENESS] == [missed_by_ms]
    assert values[m.RUNS_COMPLETED] == [1]
