"""The ``@workflow`` decorator and the process-wide registry of workflows keyed by id."""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeVar, overload

from relayflow.errors import WorkflowNotFoundError
from relayflow.flow.declarations import Concurrency
from relayflow.protocol import VERSIONING_MODES, Versioning
from relayflow.sdk.definition import (
    check_body,
    check_concurrency,
    check_retry,
    check_tags,
    check_workflow_id,
    refuse_positional_id,
)
from relayflow.sdk.durations import Duration, parse_optional_duration
from relayflow.sdk.retry import RetryPolicy

_log = logging.getLogger("relayflow")

R = TypeVar("R")
#: How a workflow's steps become durable: each before the body goes on, or per invocation.
CheckpointMode = Literal["per_step", "batched"]
CHECKPOINT_MODES: tuple[str, ...] = ("per_step", "batched")


@dataclass(frozen=True)
class WorkflowConfig:
    """What ``@workflow`` was given.

    Attributes:
        retry: The default retry policy of every step (``ctx.set_retry`` replaces it).
        timeout_ms: The workflow's overall timeout, enforced by the orchestrator.
        tags: Tags copied onto every run.
        description: Free text for manifests and dashboards.
        schedules: Recurring schedules (``relayflow.Schedule``) that start runs.
        checkpoint: ``"per_step"`` (each completed step attempt is durable before the body
            goes on, where the host has a checkpoint log) or ``"batched"`` (the steps of an
            invocation become durable together when it answers).
        concurrency: At most ``limit`` runs per key at once (see ``relayflow.flow``).
        versioning: ``"pinned"`` (each run keeps the code version it started on) or
            ``"upgrade"`` (runs move to the current code at their next invocation).
    """

    retry: RetryPolicy | None = None
    timeout_ms: int | None = None
    tags: tuple[str, ...] = ()
    description: str | None = None
    schedules: tuple[Any, ...] = ()
    checkpoint: CheckpointMode = "per_step"
    concurrency: Concurrency | None = None
    versioning: Versioning = "pinned"


class Workflow(Generic[R]):
    """A registered workflow body.

    Attributes:
        id: The workflow id (the registry key).
        config: Its :class:`WorkflowConfig`.
        fn: The decorated body, ``def`` or ``async def body(input, ctx)``.
        is_async: True for an ``async def`` body (it gets an async ``ctx``).

    Calling the object calls the body, which keeps it usable in plain unit tests.
    """

    def __init__(self, workflow_id: str, fn: Callable[..., R], config: WorkflowConfig) -> None:
        self.id = workflow_id
        self.fn = fn
        self.config = config
        self.is_async = inspect.iscoroutinefunction(fn)
        self.__doc__ = fn.__doc__
        self.__name__ = getattr(fn, "__name__", workflow_id)
        self.__wrapped__ = fn

    def __call__(self, input: Any, ctx: Any) -> R:
        return self.fn(input, ctx)

    def __repr__(self) -> str:
        return f"Workflow(id={self.id!r})"


_REGISTRY: dict[str, Workflow[Any]] = {}
#: Workflows relayflow itself hosts (bulk jobs): found before users' ones, never listed in a
#: manifest, kept when tests reset the registry.
_BUILTINS: dict[str, Workflow[Any]] = {}


@overload
def workflow(
    fn: Callable[..., R],
) -> Workflow[R]: ...


@overload
def workflow(
    fn: None = None,
    *,
    id: str | None = None,
    retry: RetryPolicy | None = None,
    timeout: Duration | None = None,
    tags: Sequence[str] = (),
    description: str | None = None,
    schedule: Any = None,
    checkpoint: CheckpointMode = "per_step",
    concurrency: Concurrency | None = None,
    versioning: Versioning = "pinned",
) -> Callable[[Callable[..., R]], Workflow[R]]: ...


def workflow(
    fn: Callable[..., R] | None = None,
    *,
    id: str | None = None,
    retry: RetryPolicy | None = None,
    timeout: Duration | None = None,
    tags: Sequence[str] = (),
    description: str | None = None,
    schedule: Any = None,
    checkpoint: CheckpointMode = "per_step",
    concurrency: Concurrency | None = None,
    versioning: Versioning = "pinned",
) -> Workflow[R] | Callable[[Callable[..., R]], Workflow[R]]:
    """Declare and register a workflow body.

    Args:
        fn: The body when the decorator is used bare (its id is then the function name).
        id: The workflow id; registering an id again replaces the old entry with a warning.
        retry: The default retry policy of every step.
        timeout: The overall timeout of a run (a duration).
        tags: Tags copied onto every run.
        description: Free text.
        schedule: One ``Schedule`` (``Schedule.cron/every/at``) or reference-shaped dict, or
            a list of them; each firing starts a run (see docs/guides/schedules.md).
        checkpoint: ``"per_step"`` (default) or ``"batched"``; see
            docs/operations/durability.md for what each costs and what a crash re-runs.
        concurrency: A :class:`~relayflow.flow.Concurrency`: at most ``limit`` runs with the
            same key at once, and what a run finds when every slot is taken (see
            docs/guides/flow-control.md).
        versioning: ``"pinned"`` (default): a run keeps the code version that answered its
            first invocation; ``"upgrade"``: it moves to the current code at its next
            invocation (guard changes with ``ctx.patched``). See docs/guides/versioning.md.

    Returns:
        The :class:`Workflow` (or a decorator producing it).

    Raises:
        ValueError: The id is empty, ``timeout`` is not a duration, or ``checkpoint`` or
            ``versioning`` is not a known mode.
        TypeError: The id is given positionally, ``retry`` is not a ``RetryPolicy``,
            ``tags`` is not a list of strings, the body does not take ``(input, ctx)``, or
            ``concurrency`` is not a ``Concurrency``.

    Example:
        >>> @workflow(id="greet")
        ... def greet(name, ctx):
        ...     return ctx.step("hello", lambda: f"hello {name}")
    """
    refuse_positional_id(fn)
    if checkpoint not in CHECKPOINT_MODES:
        raise ValueError(
            f"checkpoint must be one of {', '.join(CHECKPOINT_MODES)}, got {checkpoint!r}"
        )
    if versioning not in VERSIONING_MODES:
        raise ValueError(
            f"versioning must be one of {', '.join(VERSIONING_MODES)}, got {versioning!r}"
        )
    from relayflow.schedules.declaration import schedules_from

    config = WorkflowConfig(
        schedules=schedules_from(schedule),
        retry=check_retry(retry),
        timeout_ms=parse_optional_duration(timeout, what="timeout"),
        tags=check_tags(tags),
        description=description,
        checkpoint=checkpoint,
        concurrency=check_concurrency(concurrency),
        versioning=versioning,
    )

    def register(body: Callable[..., R]) -> Workflow[R]:
        workflow_id = check_workflow_id(
            id if id is not None else getattr(body, "__name__", ""), body
        )
        check_body(body, workflow_id)
        created = Workflow(workflow_id, body, config)
        if workflow_id in _REGISTRY:
            _log.warning(
                "workflow %r registered again: the new definition replaces it", workflow_id
            )
        _REGISTRY[workflow_id] = created
        return created

    if fn is not None:
        return register(fn)
    return register


def get_workflow(workflow_id: str) -> Workflow[Any]:
    """The workflow registered under ``workflow_id``.

    Raises:
        WorkflowNotFoundError: Nothing is registered under that id.
    """
    found = find_workflow(workflow_id)
    if found is None:
        raise WorkflowNotFoundError(f"workflow {workflow_id!r} is not registered")
    return found


def find_workflow(workflow_id: str) -> Workflow[Any] | None:
    """The workflow registered under ``workflow_id`` (or built in), or ``None``."""
    return _BUILTINS.get(workflow_id) or _REGISTRY.get(workflow_id)


def register_builtin(builtin: Workflow[Any]) -> None:
    """Host ``builtin`` as one of relayflow's own workflows: found before any user workflow
    of the same id, and left out of :func:`registered_workflows` (and so of manifests)."""
    _BUILTINS[builtin.id] = builtin


def registered_timeout_ms(workflow_id: str) -> int | None:
    """The ``timeout`` of the workflow registered under ``workflow_id`` in ms, if any."""
    found = _REGISTRY.get(workflow_id)
    return found.config.timeout_ms if found is not None else None


def registered_concurrency(workflow_id: str) -> Concurrency | None:
    """The ``concurrency`` of the workflow registered under ``workflow_id``, if any."""
    found = _REGISTRY.get(workflow_id)
    return found.config.concurrency if found is not None else None


def registered_workflows() -> list[Workflow[Any]]:
    """Every registered workflow, in registration order."""
    return list(_REGISTRY.values())


def reset_registry() -> None:
    """Forget every registered workflow (for tests)."""
    _REGISTRY.clear()
