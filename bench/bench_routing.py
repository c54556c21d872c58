"""Routing cost per event as the number of filters grows, for other event types and for the
event's own type. Run: ``python bench/bench_routing.py``.

With filters for other types the cost stays flat (filters are indexed by event type); with
filters for the event's own type it grows with the matches, as it must.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

from relayflow.events import build_manifest, compile_filter, route_event

SIZES = (10, 1_000, 10_000)
RUNS = 7
ENVELOPE = {
    "name": "order.created",
    "data": {"id": "o1", "total": 120, "items": [{"sku": "a"}]},
    "metadata": {"eventId": "evt_1"},
    "emittedAt": "2026-05-09T13:22:08.000Z",
}
WHERE = {"gt": [{"path": "data.total"}, {"lit": 100}]}
INPUT = {"object": {"order": {"path": "data.id"}, "sku": {"path": "data.items[0].sku"}}}


def _filters(event_type: str, count: int) -> list[dict[str, Any]]:
    return [
        compile_filter(event_type, {"target": {"id": f"wf-{i}"}, "where": WHERE, "input": INPUT})
        for i in range(count)
    ]


def _manifest(filters: list[dict[str, Any]]) -> dict[str, Any]:
    return build_manifest(environment="production", workflows=[], event_filters=filters)


def _per_event_us(manifest: dict[str, Any], events: int) -> float:
    """Median over RUNS of the mean time to route one event, in microseconds."""
    route_event(manifest, ENVELOPE, "evt_1")  # builds and caches the type index
    samples = []
    for _ in range(RUNS):
        start = time.perf_counter()
        for _ in range(events):
            route_event(manifest, ENVELOPE, "evt_1")
        samples.append((time.perf_counter() - start) / events * 1e6)
    return statistics.median(samples)


def measure() -> list[tuple[int, float, float]]:
    """Rows of (filters, µs/event with them on other types, µs/event with them on this type)."""
    own = _filters("order.created", 3)
    rows = []
    for size in SIZES:
        others = _manifest(own + _filters("other.event", size))
        matched = _manifest(_filters("order.created", size))
        rows.append(
            (size, _per_event_us(others, 200), _per_event_us(matched, max(1, 2000 // size)))
        )
    return rows


def main() -> None:
    """Print the table."""
    print("route_event time per event, median of 7 runs")
    print("  other types:  N filters for other event types + 3 for the event's type")
    print("  matched type: N filters for the event's type (every one matches)")
    print(f"{'N':>8}  {'other types':>14}  {'matched type':>14}")
    for size, other_us, matched_us in measure():
        print(f"{size:>8,}  {other_us:>11.1f} µs  {matched_us:>11.1f} µs")


if __name__ == "__main__":
    main()
