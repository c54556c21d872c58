"""Where bulk jobs run: in the orchestrator's own process, whatever hosts users' workflows.

A bulk job's body acts on runs through the process's admin, so every engine routes the
built-in workflow to an in-process step host whose services hold that engine's admin (never a
process-wide one: a process may hold several engines, tests do).
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from relayflow.dispatch.inline import InlineDispatcher
from relayflow.operations.bulk_body import ADMIN_SERVICE, BULK_WORKFLOW
from relayflow.operations.bulk_models import BULK_WORKFLOW_ID

if TYPE_CHECKING:
    from relayflow.admin import WorkflowAdmin
    from relayflow.engine import Engine


def host_bulk_jobs(engine: Engine, admin: WorkflowAdmin) -> None:
    """Route ``engine``'s runs of ``relayflow.bulk-action`` to an in-process host that gives
    their body ``admin`` (whose engine the body acts through: ``engine`` itself, but for a
    test that watches or breaks what a job does).

    The host writes the job's per-step checkpoints into the engine's log (the inline
    dispatcher offers it), so a crash re-runs at most the page in flight.
    """
    host = InlineDispatcher(services={ADMIN_SERVICE: admin}, clock=engine.clock)
    resolver = engine.dispatchers
    engine.dispatchers = replace(
        resolver, by_workflow={**resolver.by_workflow, BULK_WORKFLOW_ID: host}
    )


__all__ = ["BULK_WORKFLOW", "host_bulk_jobs"]
