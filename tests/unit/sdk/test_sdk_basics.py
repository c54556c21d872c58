"""Durations, retry policies, deterministic helpers and the workflow registry."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta

import pytest
from sdk_harness import clean_registry  # noqa: F401

from relayflow.errors import FatalError, RetryableError, WorkflowNotFoundError
from relayflow.sdk import (
    RetryPolicy,
    get_workflow,
    parse_duration,
    registered_workflows,
    reset_registry,
    workflow,
)
from relayflow.sdk.determinism import fnv1a_seed, generator_for


@pytest.mark.parametrize(
    ("value", "ms"),
    [
        (0, 0),
        (250, 250),
        ("15ms", 15),
        ("2s", 2_000),
        ("10m", 600_000),
        ("3h", 10_800_000),
        ("1d", 86_400_000),
        ("2w", 1_209_600_000),
        (timedelta(seconds=1, milliseconds=500), 1_500),
    ],
)
def test_durations_convert_to_milliseconds(value: object, ms: int) -> None:
    assert parse_duration(value) == ms


@pytest.mark.parametrize(
    "value", ["1.5s", " 1s", "1s ", "1h30m", "1S", "ten", "", "-1s", -5, True, 1.5, None, [1]]
)
def test_bad_durations_raise_naming_the_value(value: object) -> None:
    with pytest.raises(ValueError, match="invalid duration") as info:
        parse_duration(value)
    assert repr(value) in str(info.value)


@pytest.mark.parametrize(
    ("backoff", "delays"),
    [
        ("fixed", [1_000, 1_000, 1_000, 1_000]),
        ("linear", [1_000, 2_000, 3_000, 4_000]),
        ("exponential", [1_000, 2_000, 4_000, 5_000]),
    ],
)
def test_backoff_follows_the_policy_and_caps_at_max_delay(backoff: str, delays: list[int]) -> None:
    policy = RetryPolicy(max=10, backoff=backoff, initial="1s", max_delay="5s")  # type: ignore[arg-type]
    assert [policy.backoff_ms(attempt) for attempt in range(1, 5)] == delays


def test_exponential_backoff_uses_the_backoff_rate() -> None:
    policy = RetryPolicy(initial=100, backoff_rate=3.0)
    assert [policy.backoff_ms(a) for a in (1, 2, 3)] == [100, 300, 900]


def test_full_jitter_is_deterministic_and_bounded() -> None:
    policy = RetryPolicy(initial=1_000, backoff="fixed", jitter="full")
    first = [policy.backoff_ms(a, jitter_key="run:step") for a in range(1, 20)]
    again = [policy.backoff_ms(a, jitter_key="run:step") for a in range(1, 20)]
    assert first == again
    assert all(0 <= d <= 1_000 for d in first)
    assert len(set(first)) > 1


def test_fatal_errors_are_never_retried_whatever_their_code() -> None:
    policy = RetryPolicy(max=5)
    assert not policy.should_retry(FatalError("no", code="CARD_DECLINED"), 1)
    assert policy.should_retry(RuntimeError("maybe"), 1)
    assert not policy.should_retry(RuntimeError("maybe"), 5)


def test_retry_on_limits_which_errors_are_retried() -> None:
    policy = RetryPolicy(max=5, retry_on=(ConnectionError,))
    assert policy.should_retry(ConnectionError(), 1)
    assert not policy.should_retry(ValueError(), 1)


def test_max_is_clamped_to_one_attempt() -> None:
    assert RetryPolicy(max=0).max_attempts == 1


@pytest.mark.parametrize(
    ("retry_after", "delay"),
    [
        (750, 750),
        ("2m", 120_000),
        (timedelta(seconds=3), 3_000),
        (datetime.fromtimestamp(1_000_010, tz=UTC), 10_000),
    ],
)
def test_retryable_error_retry_after_wins_over_the_policy(retry_after: object, delay: int) -> None:
    policy = RetryPolicy(initial=10, max_delay=20)
    error = RetryableError("later", retry_after=retry_after, code="RATE_LIMITED")  # type: ignore[arg-type]
    assert policy.delay_ms(1, error, now_ms=1_000_000_000) == delay


@pytest.mark.parametrize("bad", [{"backoff": "random"}, {"jitter": "half"}, {"initial": "1x"}])
def test_invalid_retry_policies_are_refused(bad: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        RetryPolicy(**bad)  # type: ignore[arg-type]


def test_reference_determinism_vectors() -> None:
    assert fnv1a_seed("run_abc") == 511415905
    generator = generator_for("run_abc")
    assert [generator.next_float() for _ in range(3)] == [
        0.8800948064308614,
        0.09343931032344699,
        0.35103047359734774,
    ]
    assert generator_for("run_abc").uuid4() == "e11759f6-b545-41a9-834f-e60dbf586f12"


def test_workflow_registers_by_id_with_its_config() -> None:
    policy = RetryPolicy(max=2)

    @workflow(id="orders.fulfil", retry=policy, timeout="1h", tags=["a"], description="d")
    def fulfil(data: object, ctx: object) -> object:
        return data

    assert get_workflow("orders.fulfil") is fulfil
    assert fulfil.id == "orders.fulfil"
    assert fulfil.config.retry is policy
    assert fulfil.config.timeout_ms == 3_600_000
    assert fulfil.config.tags == ("a",)
    assert fulfil.config.description == "d"
    assert not fulfil.is_async
    assert fulfil({"x": 1}, None) == {"x": 1}


def test_bare_decorator_uses_the_function_name_and_detects_async() -> None:
    @workflow
    async def plain(data: object, ctx: object) -> object:
        return data

    assert plain.id == "plain"
    assert plain.is_async


def test_registering_an_id_again_replaces_it_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    @workflow(id="dup")
    def first(data: object, ctx: object) -> str:
        return "first"

    with caplog.at_level(logging.WARNING, logger="relayflow"):

        @workflow(id="dup")
        def second(data: object, ctx: object) -> str:
            return "second"

    assert get_workflow("dup") is second
    assert [w.id for w in registered_workflows()] == ["dup"]
    assert "dup" in caplog.text


def test_unknown_ids_and_reset() -> None:
    @workflow(id="x")
    def x(data: object, ctx: object) -> None:
        return None

    reset_registry()
    assert registered_workflows() == []
    with pytest.raises(WorkflowNotFoundError):
        get_workflow("x")


def test_bad_workflow_declarations_are_refused() -> None:
    with pytest.raises(ValueError, match="invalid duration"):
        workflow(id="t", timeout="soon")
    with pytest.raises(ValueError, match="workflow id"):
        workflow(id="")(lambda data, ctx: None)
