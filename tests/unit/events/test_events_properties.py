"""Properties: canonical JSON ignores key order and reads back; routing never raises."""

from __future__ import annotations

import json
import random
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from relayflow.events import (
    MISSING,
    OPERATORS,
    canonical_json,
    derive_event_id,
    route_event,
    wire_json,
)

KEYS = st.one_of(
    st.text(max_size=6),
    st.sampled_from(["0", "1", "9", "10", "01", "-1", "4294967294", "4294967295", "é", "😀"]),
)
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=8),
)
JSON = st.recursive(
    SCALARS,
    lambda children: st.one_of(
        st.lists(children, max_size=4), st.dictionaries(KEYS, children, max_size=4)
    ),
    max_leaves=20,
)


def shuffled(value: Any, rng: random.Random) -> Any:
    """The same value with every dict's insertion order shuffled."""
    if isinstance(value, dict):
        items = list(value.items())
        rng.shuffle(items)
        return {k: shuffled(v, rng) for k, v in items}
    if isinstance(value, list):
        return [shuffled(v, rng) for v in value]
    return value


@given(JSON, st.randoms(use_true_random=False))
def test_canonical_json_is_stable_under_key_reordering(value: Any, rng: random.Random) -> None:
    assert canonical_json(shuffled(value, rng)) == canonical_json(value)


@given(JSON)
def test_canonical_and_wire_json_are_valid_json_of_the_same_value(value: Any) -> None:
    canonical = json.loads(canonical_json(value))
    wire = json.loads(wire_json(value) or "null")
    assert canonical_json(canonical) == canonical_json(value)
    assert canonical_json(wire) == canonical_json(value)


PATHS = st.one_of(
    st.sampled_from(["data", "data.a", "data.items[0].x", "metadata.eventId", "name", "[0]"]),
    st.text(max_size=12),
    JSON,
)
SIDES = st.one_of(
    st.fixed_dictionaries({"path": PATHS}), st.fixed_dictionaries({"lit": JSON}), JSON
)
PREDICATES = st.recursive(
    st.one_of(
        st.builds(lambda op, a, b: {op: [a, b]}, st.sampled_from(OPERATORS[:7]), SIDES, SIDES),
        st.builds(lambda s: {"exists": s}, SIDES),
        JSON,
    ),
    lambda children: st.one_of(
        st.builds(lambda p: {"not": p}, children),
        st.builds(lambda op, ps: {op: ps}, st.sampled_from(["and", "or"]), st.lists(children)),
        st.dictionaries(st.sampled_from([*OPERATORS, "zz"]), children, max_size=3),
    ),
    max_leaves=8,
)
MAPPERS = st.recursive(
    st.one_of(
        st.fixed_dictionaries({"passthrough": JSON}),
        st.fixed_dictionaries({"path": PATHS}),
        st.fixed_dictionaries({"lit": JSON}),
        JSON,
        st.just(MISSING),
    ),
    lambda children: st.fixed_dictionaries(
        {"object": st.one_of(st.dictionaries(KEYS, children, max_size=3), JSON)}
    ),
    max_leaves=6,
)
FILTERS = st.lists(
    st.one_of(
        st.fixed_dictionaries(
            {"id": st.text(max_size=4), "eventType": st.just("e"), "targetWorkflowId": KEYS},
            optional={"where": PREDICATES, "input": MAPPERS},
        ),
        JSON,
    ),
    max_size=4,
)
ENVELOPES = st.one_of(
    st.fixed_dictionaries(
        {"name": st.one_of(st.just("e"), JSON), "emittedAt": st.text(max_size=5)},
        optional={"data": JSON, "metadata": JSON},
    ),
    JSON,
)


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(
    FILTERS,
    ENVELOPES,
    JSON,
    st.one_of(st.none(), st.text(max_size=4)),
    st.one_of(st.just("v"), JSON),
)
def test_route_event_never_raises(
    filters: Any, envelope: Any, event_id: Any, override: str | None, version_id: Any
) -> None:
    matches = route_event(
        {"versionId": version_id, "eventFilters": filters}, envelope, event_id, override
    )
    assert isinstance(matches, list)
    for match in matches:
        assert match["status"] in ("matched", "skipped")


@given(JSON, st.text(max_size=6), st.text(max_size=6))
def test_derived_event_ids_ignore_data_key_order(data: Any, name: str, emitted_at: str) -> None:
    envelope = {"name": name, "data": data, "emittedAt": emitted_at}
    reordered = {"emittedAt": emitted_at, "data": shuffled(data, random.Random(1)), "name": name}
    assert derive_event_id(envelope) == derive_event_id(reordered)
