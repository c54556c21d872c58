"""Test workflows on a laptop: an in-memory orchestrator with a virtual clock.

Sleeps, retries and timeouts skip instantly; events, signals and token outcomes can be sent;
steps can be mocked; a host crash can be simulated with :func:`crash`.
"""

from relayflow.testing.alarms import MirroredAlarmClock
from relayflow.testing.env import WorkflowTestEnv, crash
from relayflow.testing.harness import DriverHarness

__all__ = ["DriverHarness", "MirroredAlarmClock", "WorkflowTestEnv", "crash"]
