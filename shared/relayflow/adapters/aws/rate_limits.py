"""DynamoDB rate limiters: one item per key (``#rate#<key>``) in the runs table.

The item holds the key's theoretical arrival time and its pending reservations, with a
version. A reservation reads it, computes the answer with ``relayflow.flow.rules`` and writes
it back only if the version is unchanged (else it reads again): 1 write per reservation, none
for a refused ``fail`` or a repeated reservation id.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from relayflow.adapters.aws.errors import reraise
from relayflow.adapters.aws.flow_table import (
    MAX_ATTEMPTS,
    FlowTable,
    item_key,
    lost_too_often,
)
from relayflow.flow.ports import Reservation
from relayflow.flow.rules import LimiterState, reserve_slot

PARTITION_PREFIX = "#rate#"
STATE_SK = "#gcra"


class DynamoDBRateLimiter(FlowTable):
    """The :class:`~relayflow.flow.ports.RateLimiter` port on the runs table."""

    def reserve(
        self,
        key: str,
        reservation_id: str,
        *,
        limit: int,
        window_ms: int,
        units: int,
        on_limit: Literal["queue", "fail"],
        now_ms: int,
    ) -> Reservation:
        """Reserve ``units`` for ``reservation_id`` (see the port)."""
        table_key = item_key(PARTITION_PREFIX + key, STATE_SK)
        try:
            for _ in range(MAX_ATTEMPTS):
                item = self._get(table_key)
                version = int(item["v"]["N"]) if item is not None else 0
                state = (
                    LimiterState(
                        tat_ms=int(item["tat"]["N"]), reservations=json.loads(item["res"]["S"])
                    )
                    if item is not None
                    else LimiterState()
                )
                updated, answer = reserve_slot(
                    state,
                    reservation_id,
                    limit=limit,
                    window_ms=window_ms,
                    units=units,
                    on_limit=on_limit,
                    now_ms=now_ms,
                )
                if updated is state:
                    return answer
                if self._write(table_key, updated, version):
                    return answer
        except Exception as exc:
            reraise(exc, "reserving a rate limit slot")
        raise lost_too_often("reserving a rate limit slot")

    def _write(self, table_key: dict[str, Any], state: LimiterState, version: int) -> bool:
        fields = {
            "tat": {"N": str(state.tat_ms)},
            "res": {"S": json.dumps(state.reservations, separators=(",", ":"))},
        }
        return self._put_next_version(table_key, fields, version)
