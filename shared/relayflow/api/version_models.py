"""Views of the code versions runs are on: a run's build and function, why it waits for
them, and the live runs per build (``GET /api/versions``)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from relayflow.api.model_bases import ResponseModel

Versioning = Literal["pinned", "upgrade"]
VERSIONING_DESCRIPTION = (
    "pinned: the run keeps the code version that first answered it; upgrade: each invocation "
    "goes to the current code (absent before the first answer)"
)


class CodeVersionView(ResponseModel):
    """The code a run's body runs on."""

    build: str = Field(description="the build id of the workflow code (RELAYFLOW_BUILD_ID)")
    function: str | None = Field(
        default=None,
        description="the qualified Lambda function that ran it (name:7), when a Lambda did",
    )


class VersionWaitView(ResponseModel):
    """Why and since when a pinned run waits for its code version to answer again."""

    since: int = Field(description="epoch milliseconds")
    reason: str = Field(description="what the host that answered said")
    attempts: int = Field(description="how often the run tried its version so far")


class BuildRunsView(ResponseModel):
    """The live runs of one workflow on one code version."""

    workflow_id: str
    environment: str
    build: str | None = Field(
        description="null: runs no code has answered yet (or moved to the current version)"
    )
    function: str | None = None
    runs: int = Field(description="live (not ended) runs on this version")
    waiting_for_version: int = Field(
        description="of those, the runs waiting for their version to answer"
    )


class VersionsView(ResponseModel):
    """``GET /api/versions``: the code versions live runs are on, most runs first."""

    versions: list[BuildRunsView]
    runs_read: int = Field(description="the live runs counted")
    truncated: bool = Field(
        description="true when there are more live runs than one answer reads: the counts "
        "are of the newest runsRead live runs"
    )
