"""The replay check: run a workflow's current code against recorded histories, with no effect.

Each history (a ``relayflow.history/1`` file from ``relayflow runs export``, or the document
itself) is replayed once through the step host's executor, journal only: journalled results
are returned as recorded, and the first operation the history does not hold (a step to run,
a wait not resolved, a poll, a stream) ends the replay there, before any of it runs. That end
is not a divergence: the run would go on from there on the new code. A divergence is what a
real run would fail with, ``NON_DETERMINISM``: the body reaching another operation than the
journal holds at a position (a reordered, removed, added or renamed step), or finishing
with journalled operations it never reached.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from relayflow.clock import wall_ms
from relayflow.errors import NonDeterminismError, WorkflowNotFoundError
from relayflow.protocol import FailedResponse, SerializedError, StepResponse, WaitingResponse
from relayflow.run_history import RunHistory, parse_history, read_history
from relayflow.sdk.executor import execute
from relayflow.sdk.invocation import JOURNAL_END, ExecutorOptions
from relayflow.sdk.registry import Workflow, find_workflow

#: What :func:`replay` takes as a history: the document, its JSON value or its file.
HistorySource = RunHistory | Mapping[str, Any] | str | Path


@dataclass(frozen=True)
class ReplayDivergence:
    """Where the code departs from a recorded run.

    Attributes:
        scope: The scope of the operation (``""`` is the workflow body, else a group's,
            branch's or map item's path); None when the error names no position.
        ordinal: The operation's position in its scope (from 0); None when unknown.
        expected: What the history holds there (``{"id", "kind"}``), None when nothing.
        found: What the code reaches there, None when the body finished without it.
        message: The ``NON_DETERMINISM`` message a real run would fail with.
    """

    scope: str | None
    ordinal: int | None
    expected: dict[str, str] | None
    found: dict[str, str] | None
    message: str

    def describe(self) -> str:
        """One line: where, what the history holds, what the code does."""
        where = "the workflow body" if not self.scope else f"scope {self.scope!r}"
        if self.ordinal is None:
            return self.message
        expected = _operation(self.expected, "nothing")
        found = _operation(self.found, "the end of the body")
        return f"operation #{self.ordinal} of {where}: history has {expected}, code reaches {found}"


def _operation(operation: Mapping[str, str] | None, none: str) -> str:
    return none if operation is None else f"{operation.get('kind')} {operation.get('id')!r}"


@dataclass(frozen=True)
class ReplayReport:
    """How a workflow's code replayed one recorded run.

    Attributes:
        run_id: The recorded run.
        workflow_id: The workflow whose code replayed it.
        outcome: How the replay ended: ``end_of_history`` (the body went past what the run
            recorded), ``waiting`` (on a wait the history has not resolved), ``completed``,
            ``failed`` (see ``error``), ``cancelled``, ``compensated``...
        divergences: Every place the code departs from the history (empty: it replays).
        error: The error the replay ended with, when it failed.
    """

    run_id: str
    workflow_id: str
    outcome: str
    divergences: tuple[ReplayDivergence, ...]
    error: SerializedError | None = None

    @property
    def ok(self) -> bool:
        """True when the code replays the run without a divergence."""
        return not self.divergences

    def describe(self) -> str:
        """A few lines for a terminal or an assertion message."""
        if self.ok:
            return f"run {self.run_id} ({self.workflow_id}): replays ({self.outcome})"
        lines = [f"run {self.run_id} ({self.workflow_id}): {len(self.divergences)} divergence(s)"]
        lines.extend(f"  - {d.describe()}" for d in self.divergences)
        return "\n".join(lines)


def load(history: HistorySource) -> RunHistory:
    """The history ``history`` names.

    Raises:
        HistoryFileError: A file that cannot be read, or not a ``relayflow.history/1`` one.
    """
    if isinstance(history, RunHistory):
        return history
    if isinstance(history, str | Path):
        return read_history(history)
    return parse_history(dict(history))


def _workflow(workflow: Workflow[Any] | str) -> Workflow[Any]:
    if isinstance(workflow, Workflow):
        return workflow
    found = find_workflow(workflow)
    if found is None:
        raise WorkflowNotFoundError(
            f"no workflow is registered under {workflow!r} (import the module that defines it)"
        )
    return found


def replay(
    history: HistorySource,
    workflow: Workflow[Any] | str | None = None,
    *,
    services: Mapping[str, object] | None = None,
) -> ReplayReport:
    """Replay ``workflow``'s current code against a recorded ``history``, with no effect.

    Args:
        history: A ``relayflow.history/1`` document, its JSON value or the path of its file.
        workflow: The workflow (or its id); by default the one registered under the
            history's ``workflowId``.
        services: What ``ctx.services`` resolves during the replay.

    Raises:
        HistoryFileError: The history cannot be read.
        WorkflowNotFoundError: No workflow is registered under the id.
    """
    recorded = load(history)
    found = _workflow(workflow if workflow is not None else recorded.workflow_id)
    options = ExecutorOptions(journal_only=True, sleep=lambda _seconds: None)
    response = execute(
        found, recorded.step_request(), now_ms=wall_ms, services=services, options=options
    )
    return ReplayReport(
        run_id=recorded.run_id,
        workflow_id=found.id,
        outcome=_outcome(response),
        divergences=_divergences(response),
        error=response.error if isinstance(response, FailedResponse) else None,
    )


def _outcome(response: StepResponse) -> str:
    if isinstance(response, WaitingResponse):
        ended = any(w.meta.get("reason") == JOURNAL_END for w in response.waitpoints)
        return "end_of_history" if ended else "waiting"
    return response.status


def _divergences(response: StepResponse) -> tuple[ReplayDivergence, ...]:
    if not isinstance(response, FailedResponse):
        return ()
    error = response.error
    if error.code != NonDeterminismError.code:
        return ()
    data = error.data if isinstance(error.data, dict) else {}
    ordinal = data.get("ordinal")
    return (
        ReplayDivergence(
            scope=data.get("scope"),
            ordinal=ordinal if isinstance(ordinal, int) else None,
            expected=data.get("expected"),
            found=data.get("found"),
            message=error.message or "the code no longer matches the run",
        ),
    )


def assert_replays(
    histories: HistorySource | Iterable[HistorySource],
    workflow: Workflow[Any] | str | None = None,
    *,
    services: Mapping[str, object] | None = None,
) -> list[ReplayReport]:
    """Replay every history (files, a folder's ``*.json`` files, documents) and fail with
    every divergence listed.

    Args:
        histories: One history or several: paths (a folder stands for its ``*.json``
            files), documents or their JSON values.
        workflow: The workflow to replay them with; by default each history's own.
        services: What ``ctx.services`` resolves during the replays.

    Returns:
        The reports, one per history, when none diverges.

    Raises:
        AssertionError: Some history diverges (the message lists every divergence).
    """
    reports = [replay(h, workflow, services=services) for h in _expand(histories)]
    if not reports:
        raise AssertionError("no history to replay")
    failed = [r for r in reports if not r.ok]
    if failed:
        details = "\n".join(r.describe() for r in failed)
        raise AssertionError(
            f"{len(failed)} of {len(reports)} recorded run(s) do not replay on this code:\n"
            f"{details}"
        )
    return reports


def _expand(histories: HistorySource | Iterable[HistorySource]) -> list[HistorySource]:
    if isinstance(histories, RunHistory | Mapping | str | Path):
        items: list[HistorySource] = [histories]
    else:
        items = list(histories)
    expanded: list[HistorySource] = []
    for item in items:
        if isinstance(item, str | Path) and Path(item).is_dir():
            expanded.extend(sorted(Path(item).glob("*.json")))
        else:
            expanded.append(item)
    return expanded
