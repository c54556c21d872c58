"""Instructions as data: durable operations are generators that yield these to a runner.

One implementation of each operation serves both flavours of context: the synchronous runner
performs instructions by calling, the asynchronous one by awaiting. Before a ``Call`` (user
code) the runner first waits for the checkpoint entry the branch owes (``Settle``'s job).
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar, Union

from relayflow.sdk.scope import ContextCore, StepScope

T = TypeVar("T")


@dataclass(frozen=True)
class Call:
    """Run a user function (a step attempt, a check, a compensation); its result is sent back.

    ``timeout_ms`` turns an overlong call into ``StepTimeoutError``; ``scope`` collects the
    metadata updates made while it runs. ``on_overrun`` is told, from the call's thread,
    whether the code of a call given up at its timeout raised when it finally ended.
    """

    fn: Callable[..., Any]
    args: tuple[Any, ...] = ()
    timeout_ms: int | None = None
    scope: StepScope | None = None
    label: str = ""
    on_overrun: Callable[[bool], None] | None = None


@dataclass(frozen=True)
class Pause:
    """Wait in process (a short retry delay)."""

    ms: int


@dataclass(frozen=True)
class Settle:
    """Wait until the checkpoint entries the current branch submitted are durable, then
    (with ``flush``) run ``flush``, a blocking wait for every entry of the invocation."""

    flush: Callable[[], None] | None = None


@dataclass(frozen=True)
class Body:
    """Run ``fn(ctx, *args)`` with the context flavour of the runner (group/branch bodies)."""

    fn: Callable[..., Any]
    core: ContextCore
    args: tuple[Any, ...] = ()


@dataclass(frozen=True)
class Branch:
    """One branch of a batch: a generator factory whose return value is the branch outcome."""

    index: int
    start: Callable[[], Generator[Instruction, Any, Any]]


class BatchControl(Protocol):
    """Decides, as branches finish, whether more branches may start."""

    def should_continue(self) -> bool: ...

    def started(self, index: int) -> None: ...

    def finished(self, index: int, outcome: Any) -> None: ...


@dataclass(frozen=True)
class Batch:
    """Run branches, at most ``max_concurrency`` at a time, until ``control`` says stop."""

    branches: Sequence[Branch]
    max_concurrency: int
    control: BatchControl


Instruction = Union[Call, Pause, Settle, Body, Batch]  # noqa: UP007 - a runtime alias used in isinstance
Op = Generator[Instruction, Any, T]
