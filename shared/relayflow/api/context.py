"""What the routers share: the driver, the admin, metrics, logger and the wait policy."""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import Any

from aws_lambda_powertools import Logger

from relayflow.api.metrics import MetricsSink
from relayflow.dispatch.capabilities import CapabilitySigner

#: Upper bound of one request body; larger bodies answer 413 ``payload_too_large``.
MAX_BODY_BYTES = 256 * 1024
#: Time kept free before the Lambda deadline when a caller asked to wait.
DEADLINE_MARGIN_MS = 2_000
#: How long a request drives or waits for its run unless configured otherwise.
DEFAULT_INLINE_BUDGET_MS = 10_000


@dataclass(frozen=True)
class WaitPolicy:
    """How ``waitMs`` polls a run: the clock and sleep are injectable (virtual in tests).

    Attributes:
        max_wait_ms: The cap applied to every ``waitMs`` (below API Gateway's 30 s).
        first_poll_ms: The first delay between two reads of the run; it doubles up to
            ``max_poll_ms``.
        max_poll_ms: The longest delay between two reads.
        monotonic_ms: Milliseconds of a monotonic clock.
        sleep_ms: Blocks for the given milliseconds.
    """

    max_wait_ms: int = 25_000
    first_poll_ms: int = 100
    max_poll_ms: int = 1_000
    monotonic_ms: Callable[[], float] = field(default=lambda: time.monotonic() * 1000)
    sleep_ms: Callable[[float], None] = field(default=lambda ms: time.sleep(ms / 1000))


@dataclass(frozen=True)
class ApiContext:
    """Dependencies of the route handlers.

    Attributes:
        driver: The ``relayflow.drivers.WorkflowDriver`` (trigger, ingest, manifests, injections).
        admin: The ``relayflow.drivers.WorkflowAdmin`` (list, get, cancel).
        metrics: Counter sink.
        logger: Structured logger (run and workflow ids are added as keys per request).
        wait: The ``waitMs`` polling policy.
        version: The relayflow version reported by ``/api/healthz``.
        hand_off: Drive nothing in this process: runs are handed to the drive function.
        inline_budget_ms: How long a request may drive (or wait for) its run.
        checkpoint_capabilities: Verifies the capabilities of HTTP step hosts' checkpoint
            calls (None: the checkpoint route refuses every call).
    """

    driver: Any
    admin: Any
    metrics: MetricsSink
    logger: Logger
    wait: WaitPolicy
    version: str
    hand_off: bool = False
    inline_budget_ms: int = DEFAULT_INLINE_BUDGET_MS
    checkpoint_capabilities: CapabilitySigner | None = None

    def budget_ms(self, lambda_context: Any) -> int:
        """This request's budget: the inline one, capped by the function's remaining time
        less a margin (the request must answer before its Lambda is stopped)."""
        remaining = getattr(lambda_context, "get_remaining_time_in_millis", None)
        budget = self.inline_budget_ms
        if callable(remaining):
            budget = min(budget, max(0, int(remaining()) - DEADLINE_MARGIN_MS))
        return budget

    def drive_scope(self, lambda_context: Any) -> AbstractContextManager[None]:
        """The scope a run-changing call runs in: handing off, or driving within budget."""
        engine = getattr(self.driver, "engine", None)
        if engine is None:
            return nullcontext()
        if self.hand_off:
            scope: AbstractContextManager[None] = engine.handing_off()
            return scope
        bounded: AbstractContextManager[None] = engine.budget(self.budget_ms(lambda_context))
        return bounded
