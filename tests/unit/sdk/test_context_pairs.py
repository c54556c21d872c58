"""The sync and async workflow contexts expose the same operations with the same parameters.

An operation is written once and exposed by both contexts, which only adapt the calling
style: a method, parameter or default that one context has and the other lacks fails here.
"""

from __future__ import annotations

import inspect
from typing import Any

import pytest

from relayflow import SyncTokenHandle, SyncWorkflowContext, TokenHandle, WorkflowContext

PAIRS = [(WorkflowContext, SyncWorkflowContext), (TokenHandle, SyncTokenHandle)]


def _public(cls: type) -> dict[str, Any]:
    return {name: getattr(cls, name) for name in dir(cls) if not name.startswith("_")}


def _parameters(member: Any) -> list[tuple[str, Any, Any]]:
    if not callable(member):
        return []
    signature = inspect.signature(member)
    return [(p.name, p.kind, p.default) for p in signature.parameters.values()]


@pytest.mark.parametrize(("async_cls", "sync_cls"), PAIRS, ids=lambda c: c.__name__)
def test_both_contexts_offer_the_same_members(async_cls: type, sync_cls: type) -> None:
    assert sorted(_public(async_cls)) == sorted(_public(sync_cls))


@pytest.mark.parametrize(
    ("async_cls", "sync_cls", "name"),
    [(a, s, name) for a, s in PAIRS for name in sorted(_public(a)) if name in _public(s)],
    ids=lambda value: value if isinstance(value, str) else value.__name__,
)
def test_each_pair_of_methods_has_the_same_parameters(
    async_cls: type, sync_cls: type, name: str
) -> None:
    assert _parameters(getattr(async_cls, name)) == _parameters(getattr(sync_cls, name))
