"""Test workflows on a laptop: an in-memory orchestrator with a virtual clock.

Sleeps, retries and timeouts skip instantly; events, signals and token outcomes can be sent;
steps can be mocked; a host crash can be simulated with :func:`crash`. :func:`replay` and
:func:`assert_replays` check code against recorded runs before it ships.
"""

from relayflow.testing.alarms import MirroredAlarmClock
from relayflow.testing.env import WorkflowTestEnv, crash
from relayflow.testing.harness import DriverHarness
from relayflow.testing.replay import ReplayDivergence, ReplayReport, assert_replays, replay

__all__ = [
    "DriverHarness",
    "MirroredAlarmClock",
    "ReplayDivergence",
    "ReplayReport",
    "WorkflowTestEnv",
    "assert_replays",
    "crash",
    "replay",
]
