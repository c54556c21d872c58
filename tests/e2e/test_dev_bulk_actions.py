"""A bulk cancel on ``relayflow dev`` over real HTTP with the CLI: the job runs in the stack's
own process (its drive entry), driven by the local scheduler like any run."""

from __future__ import annotations

import json

from dev_process import DevProcess
from test_dev_stack import poll_run, relayflow

ORDER = json.dumps({"id": "o-bulk", "total": 10, "items": ["pen"], "coolingOff": "1h"})


def test_a_bulk_cancel_by_tag_through_the_cli(dev_stack: DevProcess) -> None:
    trigger = ("trigger", "orders.fulfil", "--input", ORDER, "--tag", "bulk-e2e", "--json")
    started = [relayflow(dev_stack, *trigger) for _ in range(3)]
    assert all(s.returncode == 0 for s in started), [s.stderr for s in started]
    run_ids = [json.loads(s.stdout)["id"] for s in started]
    bulk = ("runs", "bulk", "cancel", "--tag", "bulk-e2e")
    counted = relayflow(dev_stack, *bulk, "--dry-run")
    assert counted.returncode == 0, counted.stderr
    assert "3 runs match" in counted.stdout
    job = relayflow(dev_stack, *bulk, "--reason", "e2e", "--yes", "--json")
    assert job.returncode == 0, job.stderr
    job_id = json.loads(job.stdout)["jobId"]
    for run_id in run_ids:
        poll_run(dev_stack, run_id, lambda r: r["status"] == "cancelled")
    follow = ("runs", "bulk-status", job_id, "--follow", "--interval", "0.2", "--json")
    status = relayflow(dev_stack, *follow)
    assert status.returncode == 0, status.stderr
    progress = json.loads(status.stdout)
    assert (progress["status"], progress["matched"], progress["done"]) == ("completed", 3, 3)
    listed = relayflow(dev_stack, "runs", "bulk-list", "--json")
    assert job_id in [j["jobId"] for j in json.loads(listed.stdout)["jobs"]]
