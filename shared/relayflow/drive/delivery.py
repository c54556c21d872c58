"""What delivering a drive event cost, counted for the run it drives when it fires (arming an
alarm counts nothing: Scheduler bills a schedule when it fires, and an alarm may be armed in
one process and fire in another, which the run's next save is made by).

A one-time schedule marks the payload it delivers (``"via": "scheduler"``); a hand-off
invokes the drive function directly (counted as its invocation only); a message of the alarm
queue comes in an SQS batch.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from relayflow.costs.usage import RunUsage

#: The payload key naming what delivered a drive event.
VIA = "via"
#: ``VIA`` of an alarm a one-time EventBridge schedule delivers.
VIA_SCHEDULER = "scheduler"
#: One Scheduler invocation.
SCHEDULER_DELIVERY = RunUsage(scheduler_invocations=1)
#: A message of the alarm queue: its send and its receive. The delete the event source
#: mapping makes is shared by a batch and its empty polls by every run: neither is counted.
QUEUE_DELIVERY = RunUsage(sqs_requests=2)


def delivery_of(payload: Mapping[str, Any], *, queued: bool) -> RunUsage | None:
    """What delivering ``payload`` cost (``queued``: it came in an SQS batch)."""
    if queued:
        return QUEUE_DELIVERY
    if payload.get(VIA) == VIA_SCHEDULER:
        return SCHEDULER_DELIVERY
    return None
