"""The sweeper's clean-up of old Lambda versions: runs started on a published version pin it
(the function that ran their body records ``name:<version>``); the clean-up deletes only
versions no alias points to, with no live run pinned to them, published and last used
longer ago than the retention, and a repeated clean-up changes nothing.

Runs go through the engine on atomic moto DynamoDB (and, for the dev stack, the in-memory
store); the functions and their versions live in moto's Lambda."""

from __future__ import annotations

import io
import json
import time
import zipfile
from collections.abc import Callable, Iterator
from typing import Any

import boto3
import pytest

from relayflow import workflow
from relayflow.adapters.aws.function_versions import LambdaVersionCleaner
from relayflow.ports import PinnedRunIndex
from relayflow.testing import WorkflowTestEnv
from tests.aws.moto_driver import moto_driver
from tests.moto_support import REGION, moto_backend

pytestmark = pytest.mark.usefixtures("clean_registry")

API = "relayflow-api"
WORKER = "relayflow-worker"
DAY_MS = 86_400_000


@pytest.fixture
def lambda_client() -> Iterator[Any]:
    with moto_backend():
        yield boto3.client("lambda", region_name=REGION)


def _create_function(client: Any, name: str) -> None:
    iam = boto3.client("iam", region_name=REGION)
    try:
        role = iam.get_role(RoleName="relayflow-fn")["Role"]["Arn"]
    except iam.exceptions.NoSuchEntityException:
        role = iam.create_role(RoleName="relayflow-fn", AssumeRolePolicyDocument=json.dumps({}))[
            "Role"
        ]["Arn"]
    client.create_function(
        FunctionName=name,
        Runtime="python3.12",
        Role=role,
        Handler="handler.lambda_handler",
        Code={"ZipFile": _package(b"")},
    )


def _publish(client: Any, name: str, revision: int) -> str:
    # A deploy changes the code; Lambda publishes a version only for new code.
    client.update_function_code(FunctionName=name, ZipFile=_package(str(revision).encode()))
    version: str = client.publish_version(FunctionName=name)["Version"]
    return version


def _package(extra: bytes) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr(
            "handler.py", b"def lambda_handler(event, context):\n    return 1\n#" + extra
        )
    return buffer.getvalue()


def _versions(client: Any, name: str) -> list[str]:
    pages = client.get_paginator("list_versions_by_function").paginate(FunctionName=name)
    return [v["Version"] for page in pages for v in page["Versions"]]


def _workflows() -> list[Any]:
    @workflow(id="versions.quick", versioning="pinned")
    async def quick(data: Any, ctx: Any) -> Any:
        return await ctx.step("only", lambda: 1)

    @workflow(id="versions.slow", versioning="pinned")
    async def slow(data: Any, ctx: Any) -> Any:
        await ctx.step("first", lambda: 1)
        await ctx.sleep(f"{data['days']}d")
        return await ctx.step("last", lambda: 2)

    @workflow(id="versions.moving", versioning="upgrade")
    async def moving(data: Any, ctx: Any) -> Any:
        await ctx.sleep("30d")
        return 1

    return [quick, slow, moving]


def _moto_env(start_ms: int) -> WorkflowTestEnv:
    return moto_driver(workflows=_workflows(), start_ms=start_ms)


def _memory_env(start_ms: int) -> WorkflowTestEnv:
    return WorkflowTestEnv(workflows=_workflows(), start_ms=start_ms)


ENVIRONMENTS: dict[str, Callable[[int], WorkflowTestEnv]] = {
    "dynamodb": _moto_env,
    "memory": _memory_env,
}


def _on_version(monkeypatch: pytest.MonkeyPatch, name: str, version: str) -> None:
    # What Lambda sets in the function that runs a run's body.
    monkeypatch.setenv("AWS_LAMBDA_FUNCTION_NAME", name)
    monkeypatch.setenv("AWS_LAMBDA_FUNCTION_VERSION", version)


def _cleaner(env: WorkflowTestEnv, client: Any, **options: Any) -> LambdaVersionCleaner:
    runs = env.driver.engine.runs
    assert isinstance(runs, PinnedRunIndex)
    return LambdaVersionCleaner(
        [API, f"arn:aws:lambda:{REGION}:123456789012:function:{WORKER}"],
        runs=runs,
        client_factory=lambda: client,
        clock=env.clock,
        retention_days=options.pop("retention_days", 14),
        **options,
    )


@pytest.mark.parametrize("store", sorted(ENVIRONMENTS))
def test_only_versions_without_live_runs_past_the_retention_are_deleted(
    store: str, lambda_client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The versions are published now (moto's time), so the runs' clock starts there too.
    env = ENVIRONMENTS[store](int(time.time() * 1000))
    _create_function(lambda_client, API)
    _create_function(lambda_client, WORKER)
    ended_v1, pinned_v2, unused_v3, used_v4, live_v5 = (
        _publish(lambda_client, API, n) for n in range(1, 6)
    )
    worker_old, worker_live = (_publish(lambda_client, WORKER, n) for n in (1, 2))
    lambda_client.create_alias(FunctionName=API, Name="live", FunctionVersion=live_v5)
    lambda_client.create_alias(FunctionName=WORKER, Name="live", FunctionVersion=worker_live)

    _on_version(monkeypatch, API, ended_v1)
    assert env.trigger("versions.quick", {}).status == "completed"
    _on_version(monkeypatch, API, pinned_v2)
    held = env.trigger("versions.slow", {"days": 20})
    assert held.status == "waiting"
    assert held.code_version is not None and held.code_version.function == f"{API}:{pinned_v2}"
    _on_version(monkeypatch, API, used_v4)
    used = env.trigger("versions.slow", {"days": 10})
    # An upgrade run moves to whatever code answers: it keeps no version.
    _on_version(monkeypatch, API, unused_v3)
    assert env.trigger("versions.moving", {}).status == "waiting"
    _on_version(monkeypatch, API, live_v5)

    env.advance("1d")
    assert _cleaner(env, lambda_client).clean().deleted == [], "all within the retention"

    env.advance("14d")
    assert env.get_run(used.id).status == "completed"  # ended on day 10
    report = _cleaner(env, lambda_client).clean()
    assert sorted(report.deleted) == [
        f"{API}:{ended_v1}",
        f"{API}:{unused_v3}",
        f"{WORKER}:{worker_old}",
    ]
    assert report.pinned == [f"{API}:{pinned_v2}"]
    assert report.failures == []
    assert _versions(lambda_client, API) == ["$LATEST", pinned_v2, used_v4, live_v5]
    assert _versions(lambda_client, WORKER) == ["$LATEST", worker_live]

    again = _cleaner(env, lambda_client).clean()
    assert (again.deleted, again.failures) == ([], []), "a repeated clean-up is a no-op"

    env.advance("10d")  # day 25: the held run ended on day 20, the other on day 10
    assert env.get_run(held.id).status == "completed"
    assert _cleaner(env, lambda_client).clean().deleted == [f"{API}:{used_v4}"]
    env.advance("10d")  # day 35
    assert _cleaner(env, lambda_client).clean().deleted == [f"{API}:{pinned_v2}"]
    assert _versions(lambda_client, API) == ["$LATEST", live_v5]


def test_a_clean_up_deletes_a_bounded_number_and_the_next_one_goes_on(
    lambda_client: Any,
) -> None:
    env = _moto_env(int(time.time() * 1000))
    _create_function(lambda_client, API)
    published = [_publish(lambda_client, API, n) for n in range(1, 6)]
    lambda_client.create_alias(FunctionName=API, Name="live", FunctionVersion=published[-1])
    env.advance("15d")

    first = _cleaner(env, lambda_client, max_deletions=2).clean()
    second = _cleaner(env, lambda_client, max_deletions=2).clean()
    third = _cleaner(env, lambda_client, max_deletions=2).clean()
    assert [len(r.deleted) for r in (first, second, third)] == [2, 2, 0]
    assert _versions(lambda_client, API) == ["$LATEST", published[-1]]


def test_a_function_that_cannot_be_read_is_reported_and_the_others_are_cleaned(
    lambda_client: Any,
) -> None:
    env = _moto_env(int(time.time() * 1000))
    _create_function(lambda_client, API)
    old = _publish(lambda_client, API, 1)
    live = _publish(lambda_client, API, 2)
    lambda_client.create_alias(FunctionName=API, Name="live", FunctionVersion=live)
    env.advance("15d")

    report = _cleaner(env, lambda_client).clean()  # the worker function does not exist
    assert report.deleted == [f"{API}:{old}"]
    assert report.failures == [f"{WORKER}: ResourceNotFoundException"]


def test_the_sweeper_cleans_versions_before_it_sweeps_and_survives_a_failed_clean_up(
    lambda_client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from relayflow import deployment
    from relayflow.config import current_settings
    from relayflow.drive.handlers import make_sweeper_handler

    env = _moto_env(int(time.time() * 1000))
    _create_function(lambda_client, API)
    old = _publish(lambda_client, API, 1)
    lambda_client.create_alias(
        FunctionName=API, Name="live", FunctionVersion=_publish(lambda_client, API, 2)
    )
    env.advance("15d")
    monkeypatch.setenv("RELAYFLOW_VERSIONED_FUNCTIONS", API)
    monkeypatch.setattr(deployment, "_deployment_lambda", deployment.Lazy(lambda: lambda_client))
    current_settings.cache_clear()
    try:
        sweeper = make_sweeper_handler(
            lambda: env.driver, clean_versions=deployment.clean_function_versions
        )
        answer = sweeper({}, None)
    finally:
        current_settings.cache_clear()
    assert answer["versions"]["deleted"] == [f"{API}:{old}"]
    assert answer["swept"] == []

    def broken(driver: Any) -> dict[str, Any]:
        raise RuntimeError("Lambda is unreachable")

    failing = make_sweeper_handler(lambda: env.driver, clean_versions=broken)
    assert failing({}, None) == {"swept": [], "versions": {"error": "RuntimeError"}}
