"""Two drivers racing one run through the checkpoint channel, in memory."""

from __future__ import annotations

from relayflow.testing import WorkflowTestEnv
from tests.unit.durability.race_support import Takeover, check_race, race, run_race


def test_a_fenced_host_stops_and_the_log_never_interleaves() -> None:
    steps = Takeover()
    env = WorkflowTestEnv(workflows=[race], services={"steps": steps})
    run_id = run_race(env, steps)
    check_race(env, steps, run_id)
