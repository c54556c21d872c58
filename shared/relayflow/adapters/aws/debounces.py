"""DynamoDB debounce windows: one item per (workflow, key) (``#debounce#...``) in the runs
table, holding the open burst with a version.

A trigger reads it, decides with ``relayflow.flow.rules`` and writes it back only if the
version is unchanged (else it reads again), so a burst of concurrent triggers opens exactly
one run: 1 write per trigger. Closing deletes the item under the same condition.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any, Literal

from relayflow.adapters.aws.errors import reraise
from relayflow.adapters.aws.flow_table import (
    MAX_ATTEMPTS,
    FlowTable,
    item_key,
    lost_too_often,
    refused,
    scope_partition,
    unchanged_since,
)
from relayflow.flow.ports import DebounceDecision, SlotScope
from relayflow.flow.rules import Burst, closing, offer_trigger

PARTITION_PREFIX = "#debounce#"
STATE_SK = "#burst"


class DynamoDBDebouncer(FlowTable):
    """The :class:`~relayflow.flow.ports.Debouncer` port on the runs table."""

    def _read(self, scope: SlotScope) -> tuple[dict[str, Any], Burst | None, int]:
        table_key = item_key(scope_partition(PARTITION_PREFIX, scope), STATE_SK)
        item = self._get(table_key)
        if item is None:
            return table_key, None, 0
        return table_key, Burst(**json.loads(item["burst"]["S"])), int(item["v"]["N"])

    def offer(
        self,
        scope: SlotScope,
        run_id: str,
        input: Any,
        *,
        delay_ms: int,
        mode: Literal["leading", "trailing"],
        max_wait_ms: int | None,
        now_ms: int,
    ) -> DebounceDecision:
        """Open a burst or join the open one (see the port)."""
        try:
            for _ in range(MAX_ATTEMPTS):
                table_key, burst, version = self._read(scope)
                updated, decision = offer_trigger(
                    burst,
                    run_id,
                    input,
                    delay_ms=delay_ms,
                    mode=mode,
                    max_wait_ms=max_wait_ms,
                    now_ms=now_ms,
                )
                if updated is burst or self._write(table_key, updated, version):
                    return decision
        except Exception as exc:
            reraise(exc, "debouncing a trigger")
        raise lost_too_often("debouncing a trigger")

    def _write(self, table_key: dict[str, Any], burst: Burst, version: int) -> bool:
        burst_json = json.dumps(asdict(burst), separators=(",", ":"))
        return self._put_next_version(table_key, {"burst": {"S": burst_json}}, version)

    def close(self, scope: SlotScope, run_id: str, *, now_ms: int) -> int | None:
        """End the run's burst when it is due (see the port)."""
        try:
            for _ in range(MAX_ATTEMPTS):
                table_key, burst, version = self._read(scope)
                ends, later = closing(burst, run_id, now_ms)
                if not ends:
                    return later
                try:
                    self._db().delete_item(
                        TableName=self.table_name, Key=table_key, **unchanged_since(version)
                    )
                except Exception as exc:
                    if not refused(exc):
                        raise
                    continue
                return None
        except Exception as exc:
            reraise(exc, "closing a debounce burst")
        raise lost_too_often("closing a debounce burst")

    def current(self, scope: SlotScope) -> DebounceDecision | None:
        """The open burst, if any."""
        try:
            _, burst, _ = self._read(scope)
        except Exception as exc:
            reraise(exc, "reading a debounce burst")
        return None if burst is None else burst.decision(opened=False)
