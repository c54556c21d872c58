"""Many clients at once against a local API: counts connection resets, 5xx and wrong answers.

Every client opens a new connection per request (so the listen backlog is exercised), all
clients start together behind a barrier, and each request has an answer it must get: cancelling
an unknown run answers 404, an empty workflow id 400, the health check 200. An answer
meant for another request's body shows up as a wrong status.

Run directly to measure a fresh ``relayflow dev``:
``.venv/bin/python tests/e2e/load_probe.py [clients] [rounds]``.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import sys
import threading
from collections import Counter
from dataclasses import dataclass, field
from urllib.parse import urlsplit

#: Seconds a client waits for the start barrier and for each answer (the probe always ends).
TIMEOUT_S = 60.0


@dataclass
class LoadResult:
    """What the clients saw."""

    requests: int = 0
    resets: int = 0
    server_errors: int = 0
    wrong_answers: int = 0
    other_failures: int = 0
    statuses: Counter[int] = field(default_factory=Counter)
    samples: list[str] = field(default_factory=list)

    def summary(self) -> str:
        """One line with every count."""
        return (
            f"{self.requests} requests: {self.resets} connection resets, "
            f"{self.server_errors} answers 5xx, {self.wrong_answers} wrong answers, "
            f"{self.other_failures} other failures; statuses {dict(sorted(self.statuses.items()))}"
        )


def _request_for(client: int, round_: int) -> tuple[str, str, bytes | None, int]:
    """(method, path, body, expected status) of one request; the kinds interleave."""
    kind = (client + round_) % 3
    if kind == 0:
        body = {"reason": f"load {client}-{round_}"}
        path = f"/api/runs/run_missing_{client}_{round_}/cancel"
        return "POST", path, json.dumps(body).encode(), 404
    if kind == 1:
        return "POST", "/api/runs", json.dumps({"workflowId": ""}).encode(), 400
    return "GET", "/api/healthz", None, 200


def hammer(url: str, token: str, *, clients: int = 50, rounds: int = 4) -> LoadResult:
    """``clients`` threads each send ``rounds`` requests, all starting at once."""
    parts = urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 80
    result = LoadResult()
    lock = threading.Lock()
    barrier = threading.Barrier(clients)

    def record(outcome: str, status: int | None = None, sample: str = "") -> None:
        with lock:
            result.requests += 1
            if status is not None:
                result.statuses[status] += 1
            if outcome == "reset":
                result.resets += 1
            elif outcome == "5xx":
                result.server_errors += 1
            elif outcome == "wrong":
                result.wrong_answers += 1
            elif outcome == "failed":
                result.other_failures += 1
            if sample and len(result.samples) < 5:
                result.samples.append(sample)

    def client(index: int) -> None:
        with contextlib.suppress(threading.BrokenBarrierError):
            barrier.wait(timeout=TIMEOUT_S)
        for round_ in range(rounds):
            method, path, body, expected = _request_for(index, round_)
            headers = {"Authorization": f"Bearer {token}", "Connection": "close"}
            if body is not None:
                headers["Content-Type"] = "application/json"
            connection = http.client.HTTPConnection(host, port, timeout=TIMEOUT_S)
            try:
                connection.request(method, path, body=body, headers=headers)
                answer = connection.getresponse()
                text = answer.read().decode("utf-8", "replace")
            except (ConnectionResetError, BrokenPipeError, ConnectionAbortedError) as exc:
                record("reset", sample=f"{method} {path}: {exc!r}")
                continue
            except (OSError, http.client.HTTPException) as exc:
                record("failed", sample=f"{method} {path}: {exc!r}")
                continue
            finally:
                connection.close()
            if answer.status >= 500:
                record("5xx", answer.status, f"{method} {path}: {answer.status} {text[:200]}")
            elif answer.status != expected:
                record("wrong", answer.status, f"{method} {path}: {answer.status} {text[:200]}")
            else:
                record("ok", answer.status)

    threads = [threading.Thread(target=client, args=(i,), daemon=True) for i in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=TIMEOUT_S * (rounds + 1))
    return result


def main(argv: list[str]) -> int:
    """Start ``relayflow dev``, hammer it, print the counts."""
    from dev_process import start_dev

    clients = int(argv[0]) if argv else 50
    rounds = int(argv[1]) if len(argv) > 1 else 4
    dev = start_dev("--token", "load-token")
    try:
        result = hammer(dev.url, "load-token", clients=clients, rounds=rounds)
    finally:
        try:
            dev.interrupt()
        finally:
            dev.kill()
    print(f"{clients} concurrent clients x {rounds} rounds: {result.summary()}")
    for sample in result.samples:
        print(f"  e.g. {sample}")
    tracebacks = sum(1 for line in dev.errors if line.startswith("Traceback"))
    print(f"  tracebacks on the server's stderr: {tracebacks}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
