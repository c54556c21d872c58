"""``relayflow dev`` end to end: every example over real HTTP, with the CLI and ``requests``.

The stack runs as a subprocess on free ports (moto, the API adapter, the local scheduler);
each wait is a bounded poll.
"""

from __future__ import annotations

import json
import shlex
import shutil
import socket
import subprocess
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

import pytest
import requests
from dev_process import ROOT, DevProcess, child_env, cli_command, free_port, start_dev

TOKEN = "e2e-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
SHIPMENT = {"orderId": "o-e2e", "carrier": "UPS", "trackingNumber": "1Z999"}


def relayflow(
    dev: DevProcess, *args: str, timeout_s: float = 30
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        cli_command(*args),
        cwd=ROOT,
        env=child_env(RELAYFLOW_URL=dev.url, RELAYFLOW_TOKEN=TOKEN),
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )


def get_run(dev: DevProcess, run_id: str) -> dict[str, Any]:
    # Child run ids hold a "/": it is escaped to keep the id one path segment.
    path = quote(run_id, safe=":@")
    answer = requests.get(f"{dev.url}/api/runs/{path}", headers=AUTH, timeout=10)
    assert answer.status_code == 200, answer.text
    run: dict[str, Any] = answer.json()
    return run


def poll_run(
    dev: DevProcess, run_id: str, done: Callable[[dict[str, Any]], bool], timeout_s: float = 10
) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    run = get_run(dev, run_id)
    while not done(run):
        if time.monotonic() > deadline:
            raise AssertionError(f"run {run_id} did not get there in {timeout_s}s: {run}")
        time.sleep(0.1)
        run = get_run(dev, run_id)
    return run


def pending(run: dict[str, Any]) -> list[str]:
    return [w["id"] for w in run.get("pendingWaitpoints", [])]


def test_the_fan_out_completes_through_the_cli(dev_stack: DevProcess) -> None:
    images = {"gallery": "g-e2e", "images": ["a.jpg", "b.png", "notes.txt", "c.jpg"]}
    result = relayflow(
        dev_stack, "trigger", "media.thumbnails", "--input", json.dumps(images), "--wait"
    )
    assert result.returncode == 0, result.stderr
    assert "run completed" in result.stdout
    output = json.loads(result.stdout.split("output: ", 1)[1])
    assert output["thumbnails"] == ["a-256.webp", "b-256.webp", "c-256.webp"]
    assert output["failed"] == ["notes.txt"]


def test_a_delayed_trigger_starts_at_its_time_and_a_debounced_one_joins_it(
    dev_stack: DevProcess,
) -> None:
    images = {"gallery": "g-later", "images": ["a.jpg"]}
    debounce = json.dumps({"key": "gallery", "delay": "2s"})
    first = relayflow(
        dev_stack,
        "trigger",
        "media.thumbnails",
        "--input",
        json.dumps(images),
        "--debounce",
        debounce,
    )
    assert first.returncode == 0, first.stderr
    run_id, status = first.stdout.split()
    assert status == "delayed"
    images["images"] = ["a.jpg", "b.jpg"]
    body = {"workflowId": "media.thumbnails", "input": images, "debounce": json.loads(debounce)}
    joined = requests.post(f"{dev_stack.url}/api/runs", json=body, headers=AUTH, timeout=10)
    assert (joined.status_code, joined.json()["id"]) == (200, run_id)
    run = poll_run(dev_stack, run_id, lambda r: r["status"] == "completed", timeout_s=20)
    assert run["output"]["thumbnails"] == ["a-256.webp", "b-256.webp"], "the last input"


def test_the_order_saga_sleeps_waits_for_its_event_and_runs_its_child(
    dev_stack: DevProcess,
) -> None:
    order = {"id": "o-e2e", "total": 42, "items": ["book"], "coolingOff": "1s"}
    answer = requests.post(
        f"{dev_stack.url}/api/runs",
        json={"workflowId": "orders.fulfil", "input": order, "waitMs": 5000},
        headers=AUTH,
        timeout=30,
    )
    assert answer.status_code in (200, 201), answer.text
    run = answer.json()
    assert run["status"] == "waiting"
    assert pending(run) == ["sleep:0"]
    # The worker checkpoints each step in the runs table, as the deployed worker function does.
    assert run["durability"] == "per_step"
    run_id = run["id"]

    # Only the local scheduler firing the sleep's alarm moves the run to its event wait.
    run = poll_run(dev_stack, run_id, lambda r: pending(r) == ["event:shipment.created:1"])

    sent = relayflow(
        dev_stack, "send-event", "shipment.created", "--run", run_id, "--data", json.dumps(SHIPMENT)
    )
    assert sent.returncode == 0, sent.stderr
    done = poll_run(dev_stack, run_id, lambda r: r["status"] == "completed")
    assert done["output"]["label"]["labelId"] == "lbl-o-e2e"
    child = get_run(dev_stack, done["children"][0])
    assert (child["workflowId"], child["status"]) == ("orders.label", "completed")

    shown = relayflow(dev_stack, "runs", "get", run_id)
    assert shown.returncode == 0, shown.stderr
    assert "status    completed" in shown.stdout
    assert "wait sleep:0" in shown.stdout
    assert "step charge-card" in shown.stdout


def test_a_waiting_order_is_cancelled_with_compensation(dev_stack: DevProcess) -> None:
    order = {"id": "o-cancel", "total": 10, "items": ["pen"], "coolingOff": "1h"}
    started = relayflow(
        dev_stack, "trigger", "orders.fulfil", "--input", json.dumps(order), "--json"
    )
    assert started.returncode == 0, started.stderr
    run_id = json.loads(started.stdout)["id"]
    cancelled = relayflow(dev_stack, "runs", "cancel", run_id, "--compensate", "--json")
    assert cancelled.returncode == 0, cancelled.stderr
    run = poll_run(dev_stack, run_id, lambda r: r["status"] == "cancelled")
    assert [c["stepId"] for c in run["compensations"]] == ["charge-card", "reserve-stock"]
    again = relayflow(dev_stack, "runs", "cancel", run_id)
    assert again.returncode == 1
    assert "already" in again.stderr


def test_the_approval_takes_a_token_and_a_signal(dev_stack: DevProcess) -> None:
    claim = {"id": "c-e2e", "amount": 2500, "employee": "ann"}
    started = relayflow(
        dev_stack, "trigger", "expenses.approve", "--input", json.dumps(claim), "--json"
    )
    assert started.returncode == 0, started.stderr
    run_id = json.loads(started.stdout)["id"]
    poll_run(dev_stack, run_id, lambda r: pending(r) == ["token:manager-approval"])

    approved = relayflow(
        dev_stack,
        "token",
        "complete",
        run_id,
        "manager-approval",
        "--payload",
        '{"approved": true, "by": "bob"}',
    )
    assert approved.returncode == 0, approved.stderr
    poll_run(dev_stack, run_id, lambda r: pending(r) == ["signal:finance.approved:0"])

    answer = requests.post(
        f"{dev_stack.url}/api/runs/{run_id}/signals",
        json={"name": "finance.approved", "payload": {"by": "carol"}},
        headers=AUTH,
        timeout=30,
    )
    assert answer.status_code == 200, answer.text
    done = poll_run(dev_stack, run_id, lambda r: r["status"] == "completed")
    assert done["output"]["status"] == "paid"
    assert done["output"]["finance"] == {"by": "carol"}


def test_an_event_starts_the_invoice_workflow(dev_stack: DevProcess) -> None:
    data = {"id": "p-e2e", "amount": 250, "currency": "EUR", "customer": "acme"}
    sent = relayflow(dev_stack, "send-event", "payment.received", "--data", json.dumps(data))
    assert sent.returncode == 0, sent.stderr
    assert "queued" in sent.stdout
    run_id = sent.stdout.split("queued", 1)[1].split()[1]
    done = poll_run(dev_stack, run_id, lambda r: r["status"] == "completed")
    assert done["output"]["number"] == "INV-p-e2e"

    small = relayflow(
        dev_stack, "send-event", "payment.received", "--data", json.dumps({**data, "amount": 5})
    )
    assert small.returncode == 0, small.stderr
    assert "no filter matched" in small.stdout


def test_runs_list_and_manifest_show(dev_stack: DevProcess) -> None:
    # A run of its own: the test does not depend on which tests ran on this stack before.
    started = relayflow(dev_stack, "trigger", "orders.fulfil", "--input", json.dumps(
        {"id": "o-list", "total": 1, "items": ["x"], "coolingOff": "1h"}
    ))  # fmt: skip
    assert started.returncode == 0, started.stderr
    listed = relayflow(dev_stack, "runs", "list", "--limit", "50")
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.splitlines()[0].split()[:3] == ["RUN", "WORKFLOW", "STATUS"]
    shown = relayflow(dev_stack, "manifest", "show")
    assert shown.returncode == 0, shown.stderr
    assert "payment.received -> billing.invoice" in shown.stdout


def test_a_wrong_token_is_refused(dev_stack: DevProcess) -> None:
    result = subprocess.run(
        cli_command("--url", dev_stack.url, "--token", "wrong", "runs", "list"),
        cwd=ROOT,
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 1
    assert "unauthorized" in result.stderr


def test_the_banner_and_the_transition_log(dev_stack: DevProcess) -> None:
    output = dev_stack.output()
    assert f"API          {dev_stack.url}" in output
    assert f"token        {TOKEN}" in output
    assert "app          examples: " in output
    answer = requests.post(
        f"{dev_stack.url}/api/runs",
        json={"workflowId": "media.thumbnails", "input": {"gallery": "g-log", "images": ["a.jpg"]}},
        headers=AUTH,
        timeout=30,
    )
    run_id = answer.json()["id"]
    line = dev_stack.wait_for_output(
        lambda text: f"{run_id}  media.thumbnails  completed" in text, timeout_s=10
    )
    assert '"gallery":"g-log"' in line


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed")
def test_the_printed_curl_commands_work(dev_stack: DevProcess) -> None:
    commands = [line.strip() for line in dev_stack.lines if line.strip().startswith("curl ")]
    assert len(commands) == 3
    for command in commands:
        result = subprocess.run(
            [*shlex.split(command), "--fail", "--max-time", "20"],
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert result.returncode == 0, (command, result.stderr)
        assert isinstance(json.loads(result.stdout), dict)


def test_ctrl_c_stops_the_stack_cleanly() -> None:
    dev = start_dev()  # no --token: a random one is printed
    try:
        token_line = dev.wait_for_output(lambda line: line.startswith("  token "), 5)
        token = token_line.split()[-1]
        answer = requests.post(
            f"{dev.url}/api/runs",
            json={"workflowId": "orders.fulfil", "input": {"id": "o", "total": 1, "items": ["x"]}},
            headers={"Authorization": f"Bearer {token}"},
            timeout=30,
        )
        assert answer.status_code in (200, 201), answer.text
        assert dev.interrupt() == 0
        assert "relayflow dev: stopping" in dev.output()
        assert not any("Traceback" in line for line in dev.errors), "\n".join(dev.errors)
    finally:
        dev.kill()
    with pytest.raises(requests.ConnectionError):
        requests.get(f"{dev.url}/api/healthz", timeout=2)


def test_a_taken_port_exits_2_with_one_line() -> None:
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen()
    port = holder.getsockname()[1]
    try:
        result = subprocess.run(
            cli_command("dev", "--port", str(port), "--moto-port", str(free_port())),
            cwd=ROOT,
            env=child_env(),
            capture_output=True,
            text=True,
            timeout=30,
        )
    finally:
        holder.close()
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert lines == [
        f"relayflow dev: port {port} on 127.0.0.1 is already in use; "
        "pick another with --port/--moto-port"
    ]


def test_triggering_a_workflow_the_stack_does_not_host_exits_1_at_once(
    dev_stack: DevProcess,
) -> None:
    result = relayflow(dev_stack, "trigger", "no.such.workflow")
    assert result.returncode == 1
    assert result.stderr.startswith("error (404): workflow_not_found: workflow 'no.such.workflow'")
    assert result.stdout == ""
