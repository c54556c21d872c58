"""Runners perform instructions: the synchronous one by calling, the asynchronous one by
awaiting."""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import threading
import time
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

from relayflow.errors import StepTimeoutError
from relayflow.sdk.checkpoints import take_owed
from relayflow.sdk.instructions import Batch, Body, Call, Instruction, Op, Pause, Settle
from relayflow.sdk.overruns import ABANDONED
from relayflow.sdk.scope import STEP_SCOPE, ContextCore
from relayflow.tracing.context import running_under
from relayflow.tracing.ids import SpanRef

T = TypeVar("T")

ContextFactory = Callable[[ContextCore, Any], Any]


def _loop_running() -> bool:
    """Whether this thread runs an event loop (asked apart from running the coroutine, whose
    error would otherwise be chained to the lookup's ``RuntimeError``)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def run_coroutine_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine to completion from synchronous code, even under a running loop."""
    if not _loop_running():
        return asyncio.run(coro)
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = asyncio.run(coro)
        except BaseException as exc:  # handed back to the caller's thread
            box["error"] = exc

    thread = threading.Thread(target=target, name="relayflow-loop", daemon=True)
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    return box["value"]  # type: ignore[no-any-return]


def _is_async_callable(fn: Callable[..., Any]) -> bool:
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
        getattr(fn, "__call__", None)  # noqa: B004 - callable objects with async __call__
    )


def _timeout_error(label: str, timeout_ms: int) -> StepTimeoutError:
    return StepTimeoutError(f"step {label!r} timed out after {timeout_ms}ms")


def _span_of(instruction: Call) -> SpanRef | None:
    """The span the instruction's step attempt runs under (the run's trace)."""
    return instruction.scope.trace if instruction.scope is not None else None


def _step_key(instruction: Call) -> str | None:
    info = instruction.scope.info if instruction.scope is not None else None
    return info.idempotency_key if info is not None else None


class _Attempt:
    """One attempt running in its own thread: whether its code ended (and how) and whether
    the caller gave it up.

    ``on_overrun`` hears, exactly once, how the code of a given-up attempt ended, and before
    anyone waiting for that code sees it end (so the next attempt finds the fact recorded).
    """

    def __init__(self, step: str | None, on_overrun: Callable[[bool], None] | None) -> None:
        self.done = threading.Event()
        self._step = step
        self._on_overrun = on_overrun or (lambda raised: None)
        self._lock = threading.Lock()
        self._raised: bool | None = None
        self._abandoned = False

    def ended(self, raised: bool) -> None:
        """Called by the attempt's thread when its code returned or raised."""
        with self._lock:
            self._raised = raised
            try:
                if self._abandoned:
                    self._on_overrun(raised)
            finally:
                # Whatever the report does, the next attempt must not wait for this one.
                self.done.set()
                if self._step is not None:
                    ABANDONED.release(self._step, self.done)

    def abandon(self) -> None:
        """Give the attempt up at its timeout; the step's next one is held while its code
        runs (see ``relayflow.sdk.steps``)."""
        with self._lock:
            self._abandoned = True
            if self._raised is not None:
                # It ended between the timeout and this call: a given-up attempt all the same.
                self._on_overrun(self._raised)
            elif self._step is not None:
                ABANDONED.keep(self._step, self.done)


def _start_thread(fn: Callable[[], Any], attempt: _Attempt, box: dict[str, Any]) -> None:
    """Run ``fn`` in a daemon thread filling ``box``; ``attempt`` hears when it ended."""
    context = contextvars.copy_context()

    def target() -> None:
        raised = False
        try:
            box["value"] = context.run(fn)
        except BaseException as exc:  # handed back to the waiting thread
            box["error"] = exc
            raised = True
        finally:
            attempt.ended(raised)

    threading.Thread(target=target, name="relayflow-step", daemon=True).start()


def _call_in_thread(
    fn: Callable[[], Any],
    timeout_ms: int | None,
    label: str,
    step: str | None = None,
    on_overrun: Callable[[bool], None] | None = None,
) -> Any:
    """Call ``fn`` in a daemon thread; an uncooperative call is abandoned at the timeout and
    kept in ``ABANDONED`` under ``step`` while its code runs on."""
    timeout_s = None if timeout_ms is None else timeout_ms / 1000
    box: dict[str, Any] = {}
    attempt = _Attempt(step, on_overrun)
    _start_thread(fn, attempt, box)
    if not attempt.done.wait(timeout_s):
        attempt.abandon()
        raise _timeout_error(label, timeout_ms or 0)
    if "error" in box:
        raise box["error"]
    return box["value"]


def _thread_future(fn: Callable[[], Any], attempt: _Attempt) -> asyncio.Future[Any]:
    """Run ``fn`` in a daemon thread and expose it as a future (never blocks loop shutdown);
    ``attempt`` hears when the thread ended."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[Any] = loop.create_future()
    context = contextvars.copy_context()

    def settle(value: Any, error: BaseException | None) -> None:
        if future.done():
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(value)

    def target() -> None:
        value: Any = None
        error: BaseException | None = None
        try:
            value = context.run(fn)
        except BaseException as exc:  # handed back to the loop
            error = exc
        finally:
            attempt.ended(error is not None)
        try:
            loop.call_soon_threadsafe(settle, value, error)
        except RuntimeError:
            return  # the loop is gone: the caller stopped waiting (timeout or abandon)

    threading.Thread(target=target, name="relayflow-step", daemon=True).start()
    return future


class SyncRunner:
    """Performs instructions for a ``def`` body: user calls return values, branches run in order."""

    is_async = False

    def __init__(self, make_context: ContextFactory, sleep: Callable[[float], None] | None) -> None:
        self._make_context = make_context
        self._sleep = sleep or time.sleep

    def context(self, core: ContextCore) -> Any:
        """The synchronous ctx for ``core``."""
        return self._make_context(core, self)

    def drive(self, op: Op[T]) -> T:
        """Run an operation to its return value, performing each instruction it yields."""
        try:
            instruction = next(op)
            while True:
                try:
                    result = self._perform(instruction)
                except BaseException as exc:
                    instruction = op.throw(exc)
                else:
                    instruction = op.send(result)
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]

    def _perform(self, instruction: Instruction) -> Any:
        if isinstance(instruction, Call | Settle):
            owed = take_owed()
            if owed is not None:
                owed.settle(owed.ticket)
        if isinstance(instruction, Settle):
            if instruction.flush is not None:
                instruction.flush()
            return None
        if isinstance(instruction, Call):
            with running_under(_span_of(instruction)):
                return self._call(instruction)
        if isinstance(instruction, Pause):
            if instruction.ms > 0:
                self._sleep(instruction.ms / 1000)
            return None
        if isinstance(instruction, Body):
            result = instruction.fn(self.context(instruction.core), *instruction.args)
            if inspect.isawaitable(result):
                raise TypeError("a synchronous workflow body cannot run an async function with ctx")
            return result
        return self._batch(instruction)

    def _call(self, instruction: Call) -> Any:
        token = STEP_SCOPE.set(instruction.scope) if instruction.scope is not None else None
        try:
            if instruction.timeout_ms is None:
                result = instruction.fn(*instruction.args)
                if inspect.isawaitable(result):
                    result = run_coroutine_sync(_await(result))
                return result

            def invoke() -> Any:
                value = instruction.fn(*instruction.args)
                if inspect.isawaitable(value):
                    value = asyncio.run(_await(value))
                return value

            return _call_in_thread(
                invoke,
                instruction.timeout_ms,
                instruction.label,
                _step_key(instruction),
                instruction.on_overrun,
            )
        finally:
            if token is not None:
                STEP_SCOPE.reset(token)

    def _batch(self, instruction: Batch) -> None:
        for branch in instruction.branches:
            if not instruction.control.should_continue():
                return
            instruction.control.started(branch.index)
            instruction.control.finished(branch.index, self.drive(branch.start()))


async def _await(awaitable: Awaitable[T]) -> T:
    return await awaitable


class AsyncRunner:
    """Performs instructions for an ``async def`` body: sync calls go to worker threads."""

    is_async = True

    def __init__(self, make_context: ContextFactory, sleep: Callable[[float], None] | None) -> None:
        self._make_context = make_context
        self._sleep = sleep

    def context(self, core: ContextCore) -> Any:
        """The asynchronous ctx for ``core``."""
        return self._make_context(core, self)

    async def drive(self, op: Op[T]) -> T:
        """Run an operation to its return value, awaiting each instruction it yields."""
        try:
            instruction = next(op)
            while True:
                try:
                    result = await self._perform(instruction)
                except BaseException as exc:
                    instruction = op.throw(exc)
                else:
                    instruction = op.send(result)
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]

    async def _perform(self, instruction: Instruction) -> Any:
        if isinstance(instruction, Call | Settle):
            owed = take_owed()
            if owed is not None:
                # Off the loop: other branches go on and queue entries for the next write.
                await asyncio.get_running_loop().run_in_executor(
                    owed.checkpointer.waiters,
                    contextvars.copy_context().run,
                    owed.settle,
                    owed.ticket,
                )
        if isinstance(instruction, Settle):
            if instruction.flush is not None:
                await asyncio.to_thread(instruction.flush)
            return None
        if isinstance(instruction, Call):
            with running_under(_span_of(instruction)):
                return await self._call(instruction)
        if isinstance(instruction, Pause):
            if self._sleep is not None:
                self._sleep(instruction.ms / 1000)
            elif instruction.ms > 0:
                await asyncio.sleep(instruction.ms / 1000)
            return None
        if isinstance(instruction, Body):
            result = instruction.fn(self.context(instruction.core), *instruction.args)
            if inspect.isawaitable(result):
                result = await result
            return result
        return await self._batch(instruction)

    async def _call(self, instruction: Call) -> Any:
        token = STEP_SCOPE.set(instruction.scope) if instruction.scope is not None else None
        try:
            step = _step_key(instruction) if instruction.timeout_ms is not None else None
            attempt: _Attempt | None = None
            if _is_async_callable(instruction.fn):
                pending: Awaitable[Any] = instruction.fn(*instruction.args)
            else:
                fn, args = instruction.fn, instruction.args
                attempt = _Attempt(step, instruction.on_overrun)
                pending = _thread_future(lambda: fn(*args), attempt)
            if instruction.timeout_ms is None:
                result = await pending
            else:
                try:
                    result = await asyncio.wait_for(pending, instruction.timeout_ms / 1000)
                except TimeoutError:
                    if attempt is not None:
                        attempt.abandon()
                    raise _timeout_error(instruction.label, instruction.timeout_ms) from None
            if inspect.isawaitable(result):
                result = await result
            return result
        finally:
            if token is not None:
                STEP_SCOPE.reset(token)

    async def _batch(self, instruction: Batch) -> None:
        waiting = deque(instruction.branches)
        running: dict[asyncio.Task[Any], int] = {}
        try:
            while waiting or running:
                while (
                    waiting
                    and len(running) < instruction.max_concurrency
                    and instruction.control.should_continue()
                ):
                    branch = waiting.popleft()
                    instruction.control.started(branch.index)
                    running[asyncio.ensure_future(self.drive(branch.start()))] = branch.index
                if not running:
                    return
                done, _ = await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)
                for task in sorted(done, key=lambda t: running[t]):
                    index = running.pop(task)
                    error = task.exception()
                    if error is not None:
                        raise error
                    instruction.control.finished(index, task.result())
                if not instruction.control.should_continue():
                    return
        finally:
            for task in running:
                task.cancel()
            if running:
                await asyncio.gather(*running, return_exceptions=True)
