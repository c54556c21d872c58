"""Flow-control declarations: what each accepts and refuses, the keys they resolve, and how
they reach the manifest and the step host."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

import relayflow.flow
from relayflow import build_manifest, workflow
from relayflow.adapters.memory.flow import InMemoryRateLimiter
from relayflow.events.manifest import manifest_errors
from relayflow.flow import (
    Concurrency,
    Debounce,
    FlowControlError,
    FlowKeyMissingError,
    RateLimit,
    TriggerOptions,
)
from relayflow.flow.keys import resolve_key
from relayflow.protocol import StepRequest
from relayflow.sdk.invocation import ExecutorOptions
from relayflow.worker import handle_step_request

T0 = 1_700_000_000_000


pytestmark = pytest.mark.usefixtures("clean_registry")


def test_the_flow_package_exports_are_pinned() -> None:
    assert sorted(relayflow.flow.__all__) == [
        "Concurrency",
        "Debounce",
        "FlowControlError",
        "FlowKeyMissingError",
        "RateLimit",
        "RateLimitedError",
        "RateLimiterMissingError",
        "TriggerOptions",
    ]


@pytest.mark.parametrize(
    ("build", "says"),
    [
        (lambda: Concurrency(limit=0), "at least 1"),
        (lambda: Concurrency(limit=True), "integer"),
        (lambda: Concurrency(limit=2, strategy="fifo"), "queue, cancel-in-progress"),
        (lambda: Concurrency(limit=2, key=""), "path into the input"),
        (lambda: Concurrency(limit=2, key="items[x]"), "path into the input"),
        (lambda: Concurrency(limit=2, key="input"), "path into the input"),
        (lambda: RateLimit(key="", limit=1, window="1m"), "non-empty string"),
        (lambda: RateLimit(key="k", limit=2, window="1m", units=3), "exceed the limit"),
        (lambda: RateLimit(key="k", limit=2, window="0s"), "longer than 0"),
        (lambda: RateLimit(key="k", limit=2, window="1 minute"), "invalid duration"),
        (lambda: RateLimit(key="k", limit=2, window="1m", on_limit="drop"), "queue, fail"),
        (lambda: Debounce(key="input.k", delay="5s", max_wait="1s"), "must not be shorter"),
        (lambda: Debounce(key="input.k", delay="5s", mode="middle"), "leading, trailing"),
        (lambda: TriggerOptions(priority=1001), "-1000 to 1000"),
        (lambda: TriggerOptions(ttl="0ms"), "longer than 0"),
        (lambda: TriggerOptions(delay=-1), "negative"),
        (lambda: TriggerOptions(concurrency_key=""), "1 to 256"),
        (lambda: TriggerOptions(debounce={"key": "k"}), "Debounce("),  # type: ignore[arg-type]
    ],
)
def test_bad_declarations_are_refused_naming_the_field(build: Any, says: str) -> None:
    with pytest.raises(FlowControlError, match=None) as raised:
        build()
    assert says in str(raised.value)


def test_wire_forms_use_the_reference_names() -> None:
    assert Concurrency(limit=5, key="customerId").to_wire() == {
        "key": "customerId",
        "limit": 5,
        "strategy": "queue",
    }
    assert Concurrency(limit=1, key=lambda data: data["id"]).to_wire() is None
    assert RateLimit(key="api", limit=100, window="1m", on_limit="fail").to_wire() == {
        "key": "api",
        "limit": 100,
        "units": 1,
        "window": 60_000,
        "onLimit": "fail",
    }
    debounce = Debounce.from_wire({"key": "input.k", "delay": "2s", "maxWait": 10_000})
    assert debounce.to_wire() == {
        "key": "input.k",
        "delay": 2_000,
        "mode": "trailing",
        "maxWait": 10_000,
    }
    with pytest.raises(FlowControlError, match="unknown field"):
        Concurrency.from_wire({"limit": 1, "keys": "x"})


def test_trigger_options_compute_the_start_and_list_what_they_set() -> None:
    assert TriggerOptions().start_at_ms(T0) == T0
    assert TriggerOptions(delay="10m").start_at_ms(T0) == T0 + 600_000
    at = datetime.fromtimestamp((T0 + 5_000) / 1000, tz=UTC)
    assert TriggerOptions(delay=at).start_at_ms(T0) == T0 + 5_000
    assert TriggerOptions(delay=at).start_at_ms(T0 + 9_000) == T0 + 9_000, "never in the past"
    options = TriggerOptions(ttl="1h", priority=3, concurrency_key="acme")
    assert options.given() == ["ttl", "priority", "concurrencyKey"]


@pytest.mark.parametrize(
    ("key", "input", "event", "expected"),
    [
        ("customerId", {"customerId": "acme"}, None, "acme"),
        ("input.customer.id", {"customer": {"id": 7}}, None, "7"),
        ("input.items[1]", {"items": ["a", 2.5]}, None, "2.5"),
        ("event.data.tenant", None, {"name": "x", "data": {"tenant": "t1"}}, "t1"),
        (lambda data: data["k"].upper(), {"k": "ab"}, None, "AB"),
    ],
)
def test_keys_resolve_against_the_input_or_the_event(
    key: Any, input: Any, event: Any, expected: str
) -> None:
    assert resolve_key(key, input, event) == expected


@pytest.mark.parametrize(
    ("key", "input"),
    [
        ("customerId", {}),
        ("customerId", {"customerId": None}),
        ("a", {"a": {"b": 1}}),
        ("a", {"a": True}),
        ("event.data.x", {"x": 1}),
    ],
)
def test_a_key_that_finds_no_string_or_number_is_refused(key: str, input: Any) -> None:
    with pytest.raises(FlowKeyMissingError, match="found no string or number"):
        resolve_key(key, input)


def test_workflow_concurrency_is_checked_and_enters_the_manifest() -> None:
    @workflow(id="crm.sync", concurrency=Concurrency(limit=5, key="customerId"))
    def sync(data: Any, ctx: Any) -> Any:
        return data

    @workflow(id="crm.local", concurrency=Concurrency(limit=1, key=lambda data: data))
    def local(data: Any, ctx: Any) -> Any:
        return data

    manifest = build_manifest(environment="production", workflows=[sync, local], event_filters=[])
    entries = {entry["id"]: entry for entry in manifest["workflows"]}
    assert entries["crm.sync"]["concurrency"] == {
        "key": "customerId",
        "limit": 5,
        "strategy": "queue",
    }
    assert "concurrency" not in entries["crm.local"], "a function key stays in process"
    assert manifest_errors(manifest) == []
    with pytest.raises(TypeError, match=r"concurrency=Concurrency\(limit=2\)"):
        workflow(id="bad", concurrency={"limit": 2})  # type: ignore[call-overload]


def test_a_reference_config_is_read_as_the_reference_builder_reads_it() -> None:
    """Like ``buildManifest``, only ``defaultRuntime`` of a dict's ``config`` is kept, so
    manifests built from the reference's arguments keep the reference's versionId."""
    plain = build_manifest(
        environment="production", workflows=[{"id": "wf"}], event_filters=[], built_at=T0
    )
    configured = build_manifest(
        environment="production",
        workflows=[{"id": "wf", "config": {"concurrency": {"key": "k", "limit": 1}}}],
        event_filters=[],
        built_at=T0,
    )
    assert configured["versionId"] == plain["versionId"]
    explicit = build_manifest(
        environment="production",
        workflows=[{"id": "wf", "concurrency": {"key": "k", "limit": 1, "strategy": "queue"}}],
        event_filters=[],
    )
    assert explicit["workflows"][0]["concurrency"] == {"key": "k", "limit": 1, "strategy": "queue"}


def test_a_manifest_with_an_unusable_concurrency_is_refused() -> None:
    manifest = build_manifest(
        environment="production",
        workflows=[{"id": "wf", "concurrency": {"limit": 0, "strategy": "queue"}}],
        event_filters=[],
    )
    manifest.pop("versionId")
    assert manifest_errors(manifest) == [
        "workflows.0.concurrency: concurrency limit must be an integer of at least 1, got 0"
    ]


def _call_step_host(
    options: ExecutorOptions, journal: dict[str, Any] | None = None
) -> dict[str, Any]:
    request = StepRequest.model_validate(
        {
            "run_id": "run_1",
            "workflow_id": "limited",
            "invocation_count": 1,
            "input": {"tenant": "acme"},
            "journal": journal or {},
            "run_meta": {"startedAt": T0},
        }
    ).to_wire()
    status, body = handle_step_request(request, now_ms=lambda: T0, options=options)
    assert status == 200, body
    return body


def _register_limited(limit: RateLimit) -> None:
    @workflow(id="limited")
    def limited(data: Any, ctx: Any) -> Any:
        return ctx.step("call", lambda: "called", rate_limit=limit)


def test_a_host_without_a_rate_limiter_fails_the_step_with_rate_limiter_missing() -> None:
    _register_limited(RateLimit(key="api", limit=1, window="1m"))
    body = _call_step_host(ExecutorOptions())
    assert body["status"] == "failed"
    assert body["error"]["code"] == "RATE_LIMITER_MISSING"


def test_a_queued_step_parks_on_its_slot_and_a_rerun_invocation_reserves_nothing_more() -> None:
    limiter = InMemoryRateLimiter()
    limiter.reserve(
        "acme", "other", limit=1, window_ms=60_000, units=1, on_limit="queue", now_ms=T0
    )
    _register_limited(RateLimit(key=lambda data: data["tenant"], limit=1, window="1m"))
    options = ExecutorOptions(rate_limiter=limiter)
    first = _call_step_host(options)
    again = _call_step_host(options)
    assert first["status"] == again["status"] == "waiting"
    assert first["waitpoints"] == again["waitpoints"]
    (wait,) = first["waitpoints"]
    assert (wait["clientWaitpointId"], wait["meta"]["wakeAt"]) == ("rate:call:1", T0 + 60_000)
    following = limiter.reserve(
        "acme", "next", limit=1, window_ms=60_000, units=1, on_limit="queue", now_ms=T0
    )
    assert following.at_ms == T0 + 120_000, "the re-run invocation took no second slot"
