"""The saga scenario of the crash sweep: trigger, sleep, event, child, audit failure and
compensations, driven through a :class:`Cluster` with client retries and normal recovery."""

from __future__ import annotations

from typing import Any

from reliability_cluster import Cluster, Outcome

from relayflow.errors import RunTerminalError


def saga_run_id(key: str) -> str:
    """The run id of the saga triggered with idempotency key ``key``."""
    return f"idem-reliability.saga-{key}"


def run_saga(cluster: Cluster, key: str) -> Outcome:
    """Drive one saga (order ``key``) to its end; every request is retried by its client
    and every crash is recovered by the normal means only."""
    order: dict[str, Any] = {"id": key, "total": 42, "fail": True}
    run_id = saga_run_id(key)
    cluster.client_call(
        lambda driver: driver.trigger("reliability.saga", order, idempotency_key=key)
    )
    cluster.settle(5_000)
    cluster.clock.advance(30_000)
    cluster.settle(5_000)
    cluster.client_call(
        lambda driver: driver.send_event(
            run_id, "shipped", {"orderId": key, "carrier": "UPS"}, event_id=f"evt-{key}"
        ),
        done_on=(RunTerminalError,),
    )
    cluster.finish(run_id)
    return cluster.outcome(run_id)
