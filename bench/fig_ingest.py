"""Figure 4: event ingest. Routing time per event as filters grow (``bench_routing``), and
events per second through the HTTP API handler over the AWS driver on moto.

The API is called with synthetic API Gateway HTTP API (v2) events for ``POST /api/events``;
"matched" events each start (and complete) a one-step run, "unmatched" ones match no filter.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

from bench import bench_routing, workloads
from bench.moto_stack import MotoStack
from bench.table import Row
from relayflow.local.http_adapter import LocalLambdaContext, build_http_api_event

NAME = "ingest"
FIGURE = "4 ingest"
EVENTS = 200
QUICK_EVENTS = 50
ROUTING_SIZES: tuple[int, ...] = bench_routing.SIZES


def api_event(method: str, path: str, body: Any) -> dict[str, Any]:
    """The API Gateway HTTP API (v2) event the local stack builds for a JSON request."""
    headers = {"host": "api.example.com", "content-type": "application/json"}
    return build_http_api_event(method, path, headers, json.dumps(body).encode())


def _manifest() -> dict[str, Any]:
    from relayflow.events import build_manifest, compile_filter

    one_step = compile_filter(
        "order.created",
        {"target": {"id": workloads.SEQUENTIAL}, "input": {"object": {"steps": {"lit": 1}}}},
    )
    return build_manifest(
        environment="production", workflows=[workloads.SEQUENTIAL], event_filters=[one_step]
    )


@dataclass(frozen=True)
class Throughput:
    """Ingest through the API handler."""

    label: str
    events: int
    seconds: float
    aws_requests: int

    @property
    def per_second(self) -> float:
        """Events per second."""
        return self.events / self.seconds


def measure_api(events: int = EVENTS) -> list[Throughput]:
    """Post ``events`` matched and ``events`` unmatched events through the API handler."""
    from aws_lambda_powertools import Logger

    from relayflow.api.app import create_app
    from relayflow.api.auth import AllowAllAuth
    from relayflow.api.metrics import RecordingMetrics

    results = []
    with MotoStack() as stack:
        app = create_app(
            stack.driver,
            stack.driver.admin,
            auth=AllowAllAuth(),
            metrics=RecordingMetrics(),
            logger=Logger(service="relayflow-bench", level="ERROR"),
        )
        stack.driver.register_manifest("production", _manifest())
        context: Any = LocalLambdaContext(function_name="relayflow-api", aws_request_id="bench")
        for label, name in (
            ("matched (starts a 1-step run)", "order.created"),
            ("unmatched", "user.deleted"),
        ):
            bodies = [
                {
                    "environment": "production",
                    "envelope": {
                        "name": name,
                        "data": {"id": f"o{i}"},
                        "metadata": {"eventId": f"evt-{label[:3]}-{i}"},
                        "emittedAt": "2026-01-01T00:00:00.000Z",
                    },
                }
                for i in range(events + 1)
            ]
            app.resolve(api_event("POST", "/api/events", bodies[0]), context)  # warm-up
            stack.take()
            start = time.perf_counter()
            for body in bodies[1:]:
                answer = app.resolve(api_event("POST", "/api/events", body), context)
                if answer["statusCode"] != 200:
                    raise RuntimeError(f"ingest answered {answer['statusCode']}: {answer['body']}")
            seconds = time.perf_counter() - start
            tally, _ = stack.take()
            results.append(Throughput(label, events, seconds, sum(tally.calls.values())))
    return results


@dataclass(frozen=True)
class IngestResult:
    """Routing rows from ``bench_routing`` and the API throughputs."""

    routing: list[tuple[int, float, float]]
    api: list[Throughput]


def measure(events: int = EVENTS, routing_sizes: tuple[int, ...] = ROUTING_SIZES) -> IngestResult:
    """Routing time per event, then API throughput."""
    saved = bench_routing.SIZES
    # bench_routing reads its sizes from this module constant.
    setattr(bench_routing, "SIZES", routing_sizes)  # noqa: B010
    try:
        routing = bench_routing.measure()
    finally:
        setattr(bench_routing, "SIZES", saved)  # noqa: B010
    return IngestResult(routing, measure_api(events))


def rows(result: IngestResult) -> list[Row]:
    """The figure's table rows."""
    out = [
        Row(
            FIGURE,
            f"route_event, {size:,} filters",
            f"other types {other:.1f} µs/event, matched type {matched:.1f} µs/event "
            f"(median of {bench_routing.RUNS})",
        )
        for size, other, matched in result.routing
    ]
    out.extend(
        Row(
            FIGURE,
            f"API ingest on moto, {t.label}",
            f"{t.per_second:.0f} events/s ({t.events} events, "
            f"{t.aws_requests / t.events:.1f} AWS requests/event)",
        )
        for t in result.api
    )
    return out
