"""Checks of what ``@workflow`` is given, at definition time, with what to write instead.

A mistake in a decorator would otherwise surface only when a run fails (a dict where a
``RetryPolicy`` belongs) or not at all (a string of tags split into letters).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any

from relayflow.flow.declarations import Concurrency
from relayflow.sdk.retry import RetryPolicy

__all__ = [
    "check_body",
    "check_concurrency",
    "check_retry",
    "check_tags",
    "check_workflow_id",
    "refuse_positional_id",
]


def refuse_positional_id(fn: object) -> None:
    """``@workflow("x")``: the id is keyword-only."""
    if isinstance(fn, str):
        raise TypeError(
            f"@workflow takes the id as a keyword: write @workflow(id={fn!r}), "
            f"not @workflow({fn!r})"
        )
    if fn is not None and not callable(fn):
        raise TypeError(
            f"@workflow decorates a function, got {type(fn).__name__} {fn!r}; "
            "write @workflow(id='...') above a def or async def"
        )


def check_workflow_id(workflow_id: object, body: Callable[..., Any]) -> str:
    """The id to register ``body`` under: a non-empty string."""
    if not isinstance(workflow_id, str) or not workflow_id.strip():
        name = getattr(body, "__name__", "body")
        raise ValueError(
            f"invalid workflow id {workflow_id!r} for {name}: write @workflow(id='orders.fulfil')"
        )
    return workflow_id


def _instance_or_none(value: object, cls: type[Any], field: str, example: str, home: str) -> Any:
    """``value`` if it is None or a ``cls``; else a TypeError saying what to write."""
    if value is None or isinstance(value, cls):
        return value
    name = cls.__name__
    if isinstance(value, dict):
        fields = ", ".join(f"{k}={v!r}" for k, v in value.items())
        raise TypeError(
            f"{field} must be a {name}: write {field}={name}({fields}) "
            f"(from {home} import {name}), not a dict"
        )
    raise TypeError(
        f"{field} must be a {name}, got {type(value).__name__} {value!r}: write {field}={example}"
    )


def check_retry(retry: object) -> RetryPolicy | None:
    """``retry=``: a :class:`RetryPolicy` or None."""
    checked: RetryPolicy | None = _instance_or_none(
        retry, RetryPolicy, "retry", "RetryPolicy(max=3)", "relayflow"
    )
    return checked


def check_concurrency(concurrency: object) -> Concurrency | None:
    """``concurrency=``: a :class:`~relayflow.flow.Concurrency` or None."""
    checked: Concurrency | None = _instance_or_none(
        concurrency,
        Concurrency,
        "concurrency",
        "Concurrency(limit=5, key='customerId')",
        "relayflow.flow",
    )
    return checked


def check_tags(tags: object) -> tuple[str, ...]:
    """``tags=``: a list or tuple of non-empty strings."""
    if isinstance(tags, str):
        raise TypeError(f"tags must be a list of strings: write tags=[{tags!r}], not tags={tags!r}")
    if not isinstance(tags, Sequence):
        raise TypeError(
            f"tags must be a list of strings, got {type(tags).__name__} {tags!r}: "
            "write tags=['billing']"
        )
    for tag in tags:
        if not isinstance(tag, str) or not tag:
            raise TypeError(f"each tag must be a non-empty string, got {tag!r} in tags={tags!r}")
    return tuple(tags)


def check_body(body: Callable[..., Any], workflow_id: str) -> None:
    """The body is called as ``body(input, ctx)``: it must accept those two arguments."""
    if not callable(body):
        raise TypeError(f"workflow {workflow_id!r}: the body must be a function, got {body!r}")
    try:
        signature = inspect.signature(body)
    except (TypeError, ValueError):
        return  # a builtin or C callable: it cannot be checked, it will be called as it is
    try:
        signature.bind(None, None)
    except TypeError:
        name = getattr(body, "__name__", "body")
        prefix = "async def" if inspect.iscoroutinefunction(body) else "def"
        raise TypeError(
            f"workflow {workflow_id!r}: the body is called as {name}(input, ctx), but it is "
            f"{prefix} {name}{signature}; write {prefix} {name}(input, ctx)"
        ) from None
