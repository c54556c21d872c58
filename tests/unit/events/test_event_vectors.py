"""The golden vectors of the reference (tests/vectors/*.json): every required case, by its id.

Exclusions are exactly those of the vectors' README (see tests/vectors/SOURCE.md); each skip
names the tag that excludes it.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from relayflow.events import (
    MISSING,
    EventFilterCompileError,
    InputMapperError,
    PredicateEvalError,
    TriggerRequest,
    build_manifest,
    canonical_json,
    compile_filter,
    derive_event_id,
    effective_event_id,
    evaluate_predicate,
    filter_hash,
    handle_ingest_request,
    manifest_version_id,
    project_input,
    route_event,
    run_id_for,
    sha256_hex,
    short_hash,
    validate_ingest_body,
    validate_input_mapper,
    validate_predicate,
    wire_json,
)

VECTORS = Path(__file__).resolve().parents[2] / "vectors"
ERROR_CLASSES: dict[str, type[Exception]] = {
    "PredicateEvalError": PredicateEvalError,
    "InputMapperError": InputMapperError,
    "EventFilterCompileError": EventFilterCompileError,
    # V8 TypeErrors on malformed shapes: relayflow raises its typed error at the same point.
    "TypeError": PredicateEvalError,
}
IDENTITY_KEYS = (
    "schemaVersion",
    "projectId",
    "builderVersion",
    "capabilities",
    "workflows",
    "eventFilters",
    "bindings",
    "environments",
)


def _js_function() -> None:
    """Stands in for a JavaScript function value."""


def decode(value: Any) -> Any:
    """Turn ``{"$js": ...}`` tags into the Python values relayflow takes for them."""
    if isinstance(value, dict):
        if set(value) == {"$js"}:
            return {
                "undefined": MISSING,
                "NaN": math.nan,
                "Infinity": math.inf,
                "-Infinity": -math.inf,
                "function": _js_function,
            }[value["$js"]]
        return {k: decode(v) for k, v in value.items()}
    if isinstance(value, list):
        return [decode(v) for v in value]
    return value


def has_function(value: Any) -> bool:
    if isinstance(value, dict):
        return value == {"$js": "function"} or any(has_function(v) for v in value.values())
    if isinstance(value, list):
        return any(has_function(v) for v in value)
    return False


def js_equal(expected: Any, actual: Any) -> bool:
    """Deep equality under JavaScript rules: numbers as doubles, bools apart from numbers."""
    if expected is MISSING or actual is MISSING:
        return expected is actual
    if isinstance(expected, bool) or isinstance(actual, bool):
        return type(expected) is type(actual) and expected == actual
    if isinstance(expected, (int, float)) and isinstance(actual, (int, float)):
        return float(expected) == float(actual)
    if isinstance(expected, dict) and isinstance(actual, dict):
        return set(expected) == set(actual) and all(
            js_equal(expected[k], actual[k]) for k in expected
        )
    if isinstance(expected, list) and isinstance(actual, (list, tuple)):
        return len(expected) == len(actual) and all(
            js_equal(e, a) for e, a in zip(expected, actual, strict=True)
        )
    return type(expected) is type(actual) and expected == actual


def cases(name: str, *input_keys: str) -> list[Any]:
    """The cases of a vector file, excluded ones marked skip with their tag."""
    data = json.loads((VECTORS / f"{name}.json").read_text(encoding="utf-8"))
    params = []
    for case in data["cases"]:
        tags = case.get("tags", [])
        reason = None
        if "js-proto" in tags:
            reason = "js-proto: prototype-chain lookups are not emulated (paths are missing)"
        elif "non-finite" in tags:
            reason = "non-finite: NaN/Infinity inputs have no JSON form"
        elif "js-only" in tags and any(has_function(case.get(k)) for k in input_keys):
            reason = "js-only: the input is a JavaScript function"
        marks = [pytest.mark.skip(reason=reason)] if reason else []
        params.append(pytest.param(case, id=case["id"], marks=marks))
    return params


def assert_raises_like(expected: dict[str, Any], call: Any) -> None:
    with pytest.raises(ERROR_CLASSES[expected["name"]]) as info:
        call()
    if not expected.get("engineSpecific"):
        assert info.value.message == expected["message"]
    if "errors" in expected:
        assert info.value.errors == expected["errors"]  # type: ignore[attr-defined]


@pytest.mark.parametrize("case", cases("canonical-json", "input"))
def test_canonical_json(case: dict[str, Any]) -> None:
    value = decode(case["input"])
    text = canonical_json(value)
    assert text == case["canonicalJson"]
    assert len(text.encode("utf-8")) == case["utf8Length"]
    assert sha256_hex(value) == case["sha256"]
    assert short_hash(value) == case["shortHash"]
    assert filter_hash(text) == case["fnv16"]


@pytest.mark.parametrize("case", cases("event-id", "envelope"))
def test_event_id(case: dict[str, Any]) -> None:
    envelope = decode(case["envelope"])
    data = envelope.get("data", MISSING)
    assert canonical_json(data) == case["dataCanonicalJson"]
    assert sha256_hex(data) == case["dataSha256"]
    assert derive_event_id(envelope) == case["derivedEventId"]
    assert js_equal(case["effectiveEventId"], effective_event_id(envelope))


@pytest.mark.parametrize("case", cases("predicate-eval", "predicate", "envelope"))
def test_predicate_eval(case: dict[str, Any]) -> None:
    predicate, envelope = decode(case["predicate"]), decode(case["envelope"])
    if "error" in case:
        assert_raises_like(case["error"], lambda: evaluate_predicate(predicate, envelope))
    else:
        assert evaluate_predicate(predicate, envelope) is case["result"]


@pytest.mark.parametrize("case", cases("predicate-validation", "predicate"))
def test_predicate_validation(case: dict[str, Any]) -> None:
    result = validate_predicate(decode(case["predicate"]))
    assert {"ok": result.ok, "errors": result.errors} == case["result"]


@pytest.mark.parametrize("case", cases("input-projection", "mapper", "envelope"))
def test_input_projection(case: dict[str, Any]) -> None:
    mapper, envelope = decode(case["mapper"]), decode(case["envelope"])
    if "error" in case:
        assert_raises_like(case["error"], lambda: project_input(mapper, envelope))
        return
    output = project_input(mapper, envelope)
    assert js_equal(decode(case["output"]), output)
    assert wire_json(output) == case["outputJson"]


@pytest.mark.parametrize("case", cases("input-mapper-validation", "mapper"))
def test_input_mapper_validation(case: dict[str, Any]) -> None:
    result = validate_input_mapper(decode(case["mapper"]))
    assert {"ok": result.ok, "errors": result.errors} == case["result"]


@pytest.mark.parametrize("case", cases("filter-compile", "declaration"))
def test_filter_compile(case: dict[str, Any]) -> None:
    event_type, declaration = case["eventType"], decode(case["declaration"])
    if "error" in case:
        assert_raises_like(case["error"], lambda: compile_filter(event_type, declaration))
        return
    entry = compile_filter(event_type, declaration)
    assert entry == case["sync"]["manifestEntry"]
    assert (entry["id"], entry["payloadHash"]) == (case["sync"]["id"], case["sync"]["payloadHash"])
    hashed = {
        "eventType": entry["eventType"],
        "where": entry.get("where"),
        "input": entry.get("input"),
        "targetWorkflowId": entry["targetWorkflowId"],
    }
    assert canonical_json(hashed) == case["canonicalDeclarationJson"]
    # The reference's SHA-256 variant hashes the same text.
    assert sha256_hex(hashed) == case["async"]["payloadHash"]
    assert "ef_" + sha256_hex(hashed)[:16] == case["async"]["id"]


def _build(args: dict[str, Any]) -> dict[str, Any]:
    optional = {"projectId": "project_id", "builderVersion": "builder_version"}
    return build_manifest(
        environment=args["environment"],
        workflows=args["workflows"],
        event_filters=args["eventFilters"],
        built_at=args["builtAt"],
        **{py: args[js] for js, py in optional.items() if js in args},
    )


@pytest.mark.parametrize("case", cases("manifest-version", "args"))
def test_manifest_version(case: dict[str, Any]) -> None:
    expected = case["manifest"]
    assert manifest_version_id(expected) == case["versionId"]
    identity = canonical_json({k: expected[k] for k in IDENTITY_KEYS})
    assert identity == case["identityCanonicalJson"]
    built = _build(case["args"])
    if "locale-compare" not in case.get("tags", []):
        assert built == expected
        assert list(built) == list(expected)
        return
    # Relayflow orders ids by code point, not by ICU collation: same content, other order.
    for key in ("workflows", "eventFilters"):
        assert [e["id"] for e in built[key]] == sorted(e["id"] for e in expected[key])
        assert sorted(built[key], key=json.dumps) == sorted(expected[key], key=json.dumps)
    assert built["versionId"] == manifest_version_id(built)


def _mask_details(body: Any) -> Any:
    if isinstance(body, dict) and isinstance(body.get("matches"), list):
        masked = [{k: v for k, v in m.items() if k != "details"} for m in body["matches"]]
        return {**body, "matches": masked}
    return body


@pytest.mark.parametrize("case", cases("routing", "manifest", "request"))
def test_routing(case: dict[str, Any]) -> None:
    request = validate_ingest_body(case["request"])
    envelope = request.envelope
    engine_specific = "engine-specific" in case.get("tags", [])
    assert derive_event_id(envelope) == case["derivedEventId"]
    event_id = effective_event_id(envelope)
    assert js_equal(case["eventId"], event_id)

    manifest = case["manifest"]
    if case["routerMatches"] is not None:
        routed = route_event(manifest, envelope, event_id, request.idempotency_key)
        expected = [decode(m) for m in case["routerMatches"]]
        for match in expected:
            run_id = match.pop("cloudflareRunId", None)
            if run_id is not None:
                assert run_id_for(match["targetWorkflowId"], match["idempotencyKey"]) == run_id
        if engine_specific:
            routed, expected = (
                _mask_details({"matches": routed}),
                _mask_details({"matches": expected}),
            )
        assert js_equal(expected, routed)

    failing = set(case.get("doFailWorkflowIds", []))
    forwarded: list[TriggerRequest] = []

    def trigger(req: TriggerRequest) -> str:
        forwarded.append(req)
        if req.workflow_id in failing:
            raise RuntimeError("do_returned_500")
        return req.run_id

    status, body = handle_ingest_request(
        json.dumps(case["request"]),
        get_manifest=lambda env: manifest if env == request.environment else None,
        trigger=trigger,
    )
    http = case["httpResponse"]
    assert status == http["status"]
    if engine_specific:
        assert _mask_details(body) == _mask_details(http["body"])
    else:
        assert wire_json(body) == http["bodyText"]
    calls = case.get("forwardedTriggers", [])
    assert [req.run_id for req in forwarded] == [call["doName"] for call in calls]
    assert [wire_json(req.to_wire()) for req in forwarded] == [call["bodyText"] for call in calls]


@pytest.mark.parametrize("case", cases("ingest-validation", "requestBodyText"))
def test_ingest_validation(case: dict[str, Any]) -> None:
    def trigger(req: TriggerRequest) -> str:
        raise AssertionError("no manifest is registered: nothing may be triggered")

    status, body = handle_ingest_request(
        case["requestBodyText"], get_manifest=lambda env: None, trigger=trigger
    )
    http = case["httpResponse"]
    assert status == http["status"]
    if case.get("engineSpecificMessage"):
        assert body["error"] == http["body"]["error"]
        assert isinstance(body["message"], str) and body["message"]
    else:
        assert wire_json(body) == http["bodyText"]
