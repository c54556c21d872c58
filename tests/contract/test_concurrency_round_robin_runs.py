"""``round-robin`` concurrency enforced on runs by every driver (``WorkflowTestEnv``, and on
atomic moto with the DynamoDB slots), on the virtual clock: one limit over the workflow, and
free slots handed to the keys in turn, so a key with a long queue cannot starve the others."""

from __future__ import annotations

import pytest

from tests.contract.test_flow_triggers import MakeEnv, _limited

pytestmark = pytest.mark.usefixtures("clean_registry")

MINUTE = 60_000


def test_queued_runs_start_one_key_at_a_time_in_rotation(make_env: MakeEnv) -> None:
    env, log = _limited(make_env, limit=2, strategy="round-robin")
    start = env.now()
    triggers = [("globex", f"globex-{n}") for n in range(8)]
    triggers += [(team, f"{team}-{n}") for team in ("acme", "initech") for n in range(2)]
    runs = [env.trigger("jobs.run", {"team": team, "name": name}) for team, name in triggers]
    assert [run.status for run in runs].count("queued") == 10, "2 slots for the whole workflow"
    env.run_until_idle()
    assert {env.get_run(run.id).status for run in runs} == {"completed"}
    by_minute: dict[int, set[str]] = {}
    for name, at in log:
        by_minute.setdefault((at - start) // MINUTE, set()).add(name)
    # globex held both slots first; then each freed slot goes to the next key in turn.
    assert by_minute[0] == {"globex-0", "globex-1"}
    assert by_minute[1] == {"initech-0", "acme-0"}
    assert by_minute[2] == {"globex-2", "initech-1"}
    assert by_minute[3] == {"acme-1", "globex-3"}
    assert [by_minute[m] for m in (4, 5)] == [{"globex-4", "globex-5"}, {"globex-6", "globex-7"}]
