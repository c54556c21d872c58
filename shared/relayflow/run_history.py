"""A run's recorded history as a file: what a replay check needs to run a body against it.

The format (``relayflow.history/1``) is the run's journal with every value in it (payloads
held in the payload store resolved), its input and the facts ``ctx.run`` shows, written as
camelCase JSON. ``GET /api/runs/{id}/history`` answers it and ``relayflow runs export``
writes it, one file per run; ``relayflow replay`` and :func:`relayflow.testing.replay`
read it back.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Literal

import pydantic
from pydantic import ConfigDict, Field

from relayflow.core.record import RunRecord
from relayflow.payloads import PayloadCodec
from relayflow.ports import PayloadStore
from relayflow.protocol import (
    ENVIRONMENTS,
    CodeVersion,
    Journal,
    RunMeta,
    RunTrigger,
    StepRequest,
    TenantMeta,
    WireModel,
)

HISTORY_FORMAT = "relayflow.history/1"
_UNSAFE_NAME = re.compile(r"[^A-Za-z0-9._-]")


class HistoryFileError(ValueError):
    """A history file that cannot be read or is not a ``relayflow.history/1`` document."""


class RunHistory(WireModel):
    """One run's recorded history (``relayflow.history/1``)."""

    model_config = ConfigDict(serialize_by_alias=True)

    #: The document's format and its version.
    format: Literal["relayflow.history/1"] = "relayflow.history/1"
    run_id: str = Field(min_length=1)
    workflow_id: str = Field(min_length=1)
    workflow_version: str = "v1"
    status: str = Field(description="the run's status when the history was taken")
    environment: str = "development"
    input: Any = None
    journal: Journal = Field(description="the run's journal, every value resolved")
    code_version: CodeVersion | None = Field(
        default=None, description="the code the run was last answered by"
    )
    started_at: int = Field(default=0, description="epoch milliseconds")
    run_number: int = 1
    invocation_count: int = 0
    triggered_by: RunTrigger = Field(default_factory=RunTrigger)
    tags: list[str] = Field(default_factory=list)
    tenant_meta: TenantMeta = Field(default_factory=TenantMeta)

    def step_request(self) -> StepRequest:
        """The request that replays the body against this history (no deadline, no
        checkpoint log, no cancel: the engine's request for the run's next invocation)."""
        return StepRequest(
            run_id=self.run_id,
            workflow_id=self.workflow_id,
            workflow_version=self.workflow_version,
            invocation_count=max(1, self.invocation_count),
            input=self.input,
            journal=self.journal.model_copy(deep=True),
            environment=self.environment if self.environment in ENVIRONMENTS else "development",
            tenant_meta=self.tenant_meta,
            run_meta=RunMeta(
                number=self.run_number,
                triggered_by=self.triggered_by,
                tags=list(self.tags),
                started_at=self.started_at,
            ),
        )


def history_of(record: RunRecord, payloads: PayloadStore | None) -> RunHistory:
    """The history of ``record`` with its input and journal values read from ``payloads``."""
    journal = record.journal.model_dump(mode="json", by_alias=True, exclude_none=True)
    run_input = record.input
    if payloads is not None:
        codec = PayloadCodec(payloads)
        journal = codec.resolve_journal(journal)
        run_input = codec.resolve(run_input)
    return RunHistory(
        run_id=record.id,
        workflow_id=record.workflow_id,
        workflow_version=record.workflow_version,
        status=record.status,
        environment=record.environment,
        input=run_input,
        journal=Journal.model_validate(journal),
        code_version=record.code_version,
        started_at=record.started_at,
        run_number=record.run_number,
        invocation_count=record.invocation_count,
        triggered_by=record.triggered_by,
        tags=list(record.tags),
        tenant_meta=record.tenant_meta,
    )


def parse_history(data: Any) -> RunHistory:
    """A history from its JSON value.

    Raises:
        HistoryFileError: Not a ``relayflow.history/1`` document.
    """
    if not isinstance(data, dict):
        raise HistoryFileError("a history is a JSON object")
    if data.get("format") != HISTORY_FORMAT:
        raise HistoryFileError(
            f"not a {HISTORY_FORMAT} document (format: {data.get('format')!r}); "
            "export one with `relayflow runs export`"
        )
    try:
        return RunHistory.model_validate(data)
    except pydantic.ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or 'document'}: {err['msg']}"
            for err in exc.errors()[:5]
        )
        raise HistoryFileError(f"invalid history: {problems}") from None


def read_history(path: str | Path) -> RunHistory:
    """The history in the file at ``path``.

    Raises:
        HistoryFileError: Unreadable, not JSON or not a history (the message names the file).
    """
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise HistoryFileError(f"{path}: cannot read the file ({exc.strerror})") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise HistoryFileError(f"{path}: not JSON ({exc.msg} at line {exc.lineno})") from None
    try:
        return parse_history(data)
    except HistoryFileError as exc:
        raise HistoryFileError(f"{path}: {exc}") from None


def history_file_name(run_id: str) -> str:
    """The file a run's history is exported to (child run ids hold ``/``)."""
    return f"{_UNSAFE_NAME.sub('_', run_id)}.history.json"


def write_history(history: RunHistory, directory: str | Path) -> Path:
    """Write ``history`` into ``directory`` (created when missing); returns the file."""
    folder = Path(directory)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / history_file_name(history.run_id)
    path.write_text(json.dumps(history.to_wire(), indent=2) + "\n", encoding="utf-8")
    return path
