"""Metadata application and wait ``match`` evaluation."""

from __future__ import annotations

import pytest
from core_builders import fresh_run

from relayflow.core.matching import is_deep_subset, is_predicate
from relayflow.core.metadata import apply_updates
from relayflow.protocol import MetadataUpdate


def test_each_metadata_op_follows_the_reference() -> None:
    run = fresh_run()
    updates = [
        MetadataUpdate(op="set", key="a", value=1, id="1"),
        MetadataUpdate(op="increment", key="a", value=2, id="2"),
        MetadataUpdate(op="increment", key="n", id="3"),
        MetadataUpdate(op="append", key="l", value="x", id="4"),
        MetadataUpdate(op="set", key="gone", value=1, id="5"),
        MetadataUpdate(op="remove", key="gone", id="6"),
    ]
    assert apply_updates(run, updates) == 6
    assert run.metadata == {"a": 3, "n": 1, "l": ["x"]}
    assert apply_updates(run, updates) == 0


def test_updates_without_ids_apply_positionally() -> None:
    run = fresh_run()
    first = [MetadataUpdate(op="increment", key="n")]
    apply_updates(run, first)
    apply_updates(run, [*first, MetadataUpdate(op="increment", key="n")])
    assert run.metadata == {"n": 2}


@pytest.mark.parametrize(
    ("match", "expected"),
    [({"eq": []}, True), ({"and": []}, True), ({"orderId": 1}, False), ({"eq": 1, "x": 2}, False)],
)
def test_predicates_are_single_operator_dicts(match: dict, expected: bool) -> None:
    assert is_predicate(match) is expected


def test_deep_subset_compares_nested_dicts_and_exact_lists() -> None:
    assert is_deep_subset({"a": {"b": [1]}}, {"a": {"b": [1], "c": 0}})
    assert not is_deep_subset({"a": [1]}, {"a": [1, 2]})
    assert not is_deep_subset({"a": 1}, {"b": 1})
