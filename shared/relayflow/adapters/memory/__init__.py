"""Real in-memory adapters of the ports (tests, local runs, ``relayflow.testing``)."""

from relayflow.adapters.memory.alarms import InMemoryAlarmClock
from relayflow.adapters.memory.checkpoints import InMemoryCheckpointLog
from relayflow.adapters.memory.payloads import InMemoryPayloadStore
from relayflow.adapters.memory.runs import InMemoryRunStore
from relayflow.clock import SystemClock, VirtualClock

__all__ = [
    "InMemoryAlarmClock",
    "InMemoryCheckpointLog",
    "InMemoryPayloadStore",
    "InMemoryRunStore",
    "SystemClock",
    "VirtualClock",
]
