"""Parts both ctx flavours share: facts, deterministic helpers, token handles, stream writers."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Sequence
from datetime import UTC, datetime
from typing import Any, NoReturn

from relayflow.errors import CompensateRequestedSignal
from relayflow.flow.declarations import RateLimit
from relayflow.flow.errors import FlowControlError
from relayflow.sdk import patches, tokens
from relayflow.sdk.batch import BranchSpec
from relayflow.sdk.durations import Duration, parse_optional_duration
from relayflow.sdk.info import EnvironmentInfo, RunInfo, Services, WorkflowInfo
from relayflow.sdk.metadata import Metadata
from relayflow.sdk.retry import RetryPolicy
from relayflow.sdk.runner import AsyncRunner, SyncRunner
from relayflow.sdk.scope import ContextCore
from relayflow.sdk.serdes import Serdes
from relayflow.sdk.steps import Semantics, StepOptions
from relayflow.sdk.streams import Encoding, stream_op
from relayflow.sdk.tokens import TokenSpec, token_url


def _utc(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, tz=UTC)


class _BaseContext:
    """What both flavours share: read-only facts, metadata and deterministic helpers."""

    def __init__(self, core: ContextCore) -> None:
        self._core = core
        inv = core.inv
        meta = inv.request.run_meta
        self.run = RunInfo(
            id=inv.request.run_id,
            number=meta.number,
            attempt=meta.attempt,
            triggered_by=meta.triggered_by.to_wire(),
            tags=tuple(meta.tags),
            started_at=_utc(meta.started_at),
            invocation_count=inv.request.invocation_count,
        )
        self.workflow = WorkflowInfo(inv.request.workflow_id, inv.request.workflow_version)
        self.environment = EnvironmentInfo(inv.request.environment)
        self.services = Services(inv.services)
        self.metadata = Metadata(core)

    @property
    def path(self) -> str:
        """This context's namespace (empty at the root, e.g. ``checkout`` inside a group)."""
        return self._core.path

    def now(self) -> datetime:
        """Deterministic time: the run start, moved to each replayed step's or wait's end."""
        return _utc(self._core.clock_ms)

    def random(self) -> float:
        """A deterministic draw in ``[0, 1)`` (the same sequence on every replay)."""
        return self._core.rng.next_float()

    def uuid4(self) -> str:
        """A deterministic version-4 UUID from the same generator as :meth:`random`."""
        return self._core.rng.uuid4()

    def patched(self, change_id: str) -> bool:
        """Whether the run reaches this point on code that has change ``change_id``.

        False only while the run replays history recorded before the change (its journal
        goes on past this point without the change's marker): keep the old code in that
        branch. True otherwise; the marker is journalled with the next operation, so the
        answer stays the same on every replay. See docs/guides/versioning.md.

        Raises:
            TypeError: ``change_id`` is not a str.
            ValueError: ``change_id`` is empty.
        """
        return patches.patched(self._core, change_id)

    def deprecate_patch(self, change_id: str) -> None:
        """Mark the place of a ``patched(change_id)`` whose old branch was removed.

        It never fails a replay, whether the run's history holds the marker or not; new
        runs still journal it, so code that calls ``patched(change_id)`` replays them alike.
        Delete the call once no run recorded before the change can replay.
        """
        patches.deprecate_patch(self._core, change_id)

    def set_retry(self, policy: RetryPolicy | None) -> None:
        """Replace the default retry policy of later steps in this context."""
        self._core.retry_override = policy

    def compensate(self) -> NoReturn:
        """Stop the body and run every registered compensation, newest first.

        The run ends ``compensated`` (or ``compensation_failed`` if one failed).
        """
        raise CompensateRequestedSignal()

    def _step_options(
        self,
        retry: RetryPolicy | None,
        timeout: Duration | None,
        compensate: Callable[..., Any] | None,
        idempotency_key: str | None,
        serdes: Serdes | None,
        semantics: Semantics,
        rate_limit: RateLimit | None,
    ) -> StepOptions:
        if rate_limit is not None and not isinstance(rate_limit, RateLimit):
            raise FlowControlError(
                f"rate_limit must be a RateLimit(key=..., limit=..., window=...), "
                f"got {rate_limit!r}"
            )
        return StepOptions(
            retry=retry,
            timeout_ms=parse_optional_duration(timeout),
            compensate=compensate,
            idempotency_key=idempotency_key,
            serdes=serdes,
            semantics=semantics,
            rate_limit=rate_limit,
        )

    def _parallel_specs(
        self, branches: Sequence[Callable[..., Any]], names: Sequence[str] | None
    ) -> list[BranchSpec]:
        if names is not None and len(names) != len(branches):
            raise ValueError("names must have one entry per branch")
        return [
            BranchSpec(names[i] if names is not None else str(i), fn)
            for i, fn in enumerate(branches)
        ]

    def _map_specs(
        self,
        items: Iterable[Any],
        fn: Callable[..., Any],
        item_name: Callable[[Any, int], str] | None,
    ) -> list[BranchSpec]:
        return [
            BranchSpec(item_name(item, i) if item_name else str(i), fn, (item, i))
            for i, item in enumerate(items)
        ]


class SyncTokenHandle:
    """A token created by a sync body: give ``token_id``/``url`` away, then ``wait()``."""

    def __init__(self, core: ContextCore, spec: TokenSpec) -> None:
        self._core = core
        self._spec = spec
        self.token_id = spec.public_id
        self.url = token_url(core.inv.request.run_id, spec)

    def wait(self) -> Any:
        """The completion payload; raises on failure, heartbeat or (per on_timeout) timeout."""
        return tokens.wait_token(self._core, self._spec)


class TokenHandle:
    """A token created by an async body: give ``token_id``/``url`` away, then ``await wait()``."""

    def __init__(self, core: ContextCore, spec: TokenSpec) -> None:
        self._core = core
        self._spec = spec
        self.token_id = spec.public_id
        self.url = token_url(core.inv.request.run_id, spec)

    async def wait(self) -> Any:
        """The completion payload; raises on failure, heartbeat or (per on_timeout) timeout."""
        return tokens.wait_token(self._core, self._spec)


class SyncStreamWriter:
    """``ctx.stream`` of a sync body: ``.text``, ``.json``, ``.bytes``."""

    def __init__(self, core: ContextCore, runner: SyncRunner) -> None:
        self._core = core
        self._runner = runner

    def __call__(self, stream_id: str, source: Any, encoding: Encoding = "json") -> int:
        """Emit each item of ``source`` (an iterable or a function returning one)."""
        return self._runner.drive(
            stream_op(self._core, stream_id, source, encoding, allow_async=False)
        )

    def text(self, stream_id: str, source: Any) -> int:
        """Emit items as text."""
        return self(stream_id, source, "text")

    def json(self, stream_id: str, source: Any) -> int:
        """Emit items as JSON values."""
        return self(stream_id, source, "json")

    def bytes(self, stream_id: str, source: Any) -> int:
        """Emit bytes items (base64 on the wire)."""
        return self(stream_id, source, "bytes")


class StreamWriter:
    """``ctx.stream`` of an async body; sources may also be async iterables."""

    def __init__(self, core: ContextCore, runner: AsyncRunner) -> None:
        self._core = core
        self._runner = runner

    async def __call__(self, stream_id: str, source: Any, encoding: Encoding = "json") -> int:
        """Emit each item of ``source`` (an (async) iterable or a function returning one)."""
        return await self._runner.drive(
            stream_op(self._core, stream_id, source, encoding, allow_async=True)
        )

    def text(self, stream_id: str, source: Any) -> Awaitable[int]:
        """Emit items as text."""
        return self(stream_id, source, "text")

    def json(self, stream_id: str, source: Any) -> Awaitable[int]:
        """Emit items as JSON values."""
        return self(stream_id, source, "json")

    def bytes(self, stream_id: str, source: Any) -> Awaitable[int]:
        """Emit bytes items (base64 on the wire)."""
        return self(stream_id, source, "bytes")
