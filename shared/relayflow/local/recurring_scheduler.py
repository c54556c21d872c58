"""The local stand-in for EventBridge Scheduler's recurring schedules: moto stores them but
never fires them, so this loop reads the recurring group, computes each schedule's next fire
time from its own expression, time zone and start date, and fires it into the drive handler
with ``<aws.scheduler.scheduled-time>`` filled in, as Scheduler would.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from relayflow.local.polling import PollingThread
from relayflow.schedules.times import expression_fire_times, iso_utc

_log = logging.getLogger("relayflow.local")
_SCHEDULED_TIME = "<aws.scheduler.scheduled-time>"

Fire = Callable[[dict[str, Any]], None]


@dataclass
class _Tracked:
    modified: Any
    expression: str
    timezone: str
    start_ms: int | None
    template: str
    one_shot: bool
    after_ms: int
    next_ms: int | None = None


class LocalRecurringScheduler:
    """Polls a schedule group of recurring schedules and fires each when due.

    Args:
        client: A boto3 Scheduler client (on moto).
        group: The recurring schedules' group.
        fire: Called with the firing's input on a worker thread (an asynchronous invoke).
        now_ms: Wall clock in epoch ms.
        interval_s: Pause between polls.
        wait_turn: Called before each poll; may block (see :class:`PollingThread`).
    """

    def __init__(
        self,
        *,
        client: Any,
        group: str,
        fire: Fire,
        now_ms: Callable[[], int],
        interval_s: float = 0.5,
        wait_turn: Callable[[], object] = lambda: None,
    ) -> None:
        self._client = client
        self._group = group
        self._fire = fire
        self._now_ms = now_ms
        self._tracked: dict[str, _Tracked] = {}
        self._polling = PollingThread(
            "relayflow-recurring", self._poll, interval_s, wait_turn=wait_turn
        )
        self._pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="relayflow-schedule")

    def start(self) -> None:
        """Poll in a background thread until :meth:`stop`."""
        self._polling.start()

    def stop(self) -> None:
        """Stop polling and wait for firings in progress."""
        self._polling.stop()
        self._pool.shutdown(wait=True, cancel_futures=True)

    def _poll(self) -> bool:
        self.tick(wait=False)
        return False  # due times are polled at the interval, never back to back

    def tick(self, *, wait: bool = True) -> list[tuple[str, int]]:
        """Fire every schedule due now; returns ``(name, scheduled ms)`` of each firing."""
        now = self._now_ms()
        self._refresh(now)
        fired: list[tuple[str, int]] = []
        futures = []
        for name, tracked in list(self._tracked.items()):
            while tracked.next_ms is not None and tracked.next_ms <= now:
                scheduled = tracked.next_ms
                payload = json.loads(tracked.template.replace(_SCHEDULED_TIME, iso_utc(scheduled)))
                fired.append((name, scheduled))
                futures.append(self._pool.submit(self._fire_safely, name, payload))
                tracked.after_ms = scheduled
                tracked.next_ms = self._next(tracked)
                if tracked.one_shot:
                    self._delete(name)
                    self._tracked.pop(name, None)
                    break
                # Like Scheduler, a schedule behind by several firings only fires the latest.
                if tracked.next_ms is not None and tracked.next_ms <= now:
                    tracked.after_ms = now
                    tracked.next_ms = self._next(tracked)
        if wait:
            for future in futures:
                future.result()
        return fired

    def _next(self, tracked: _Tracked) -> int | None:
        times = expression_fire_times(
            tracked.expression, tracked.timezone, tracked.start_ms, tracked.after_ms, 1
        )
        return times[0] if times else None

    def _refresh(self, now: int) -> None:
        live: dict[str, Any] = {}
        token: str | None = None
        while True:
            params: dict[str, Any] = {"GroupName": self._group, "MaxResults": 100}
            if token:
                params["NextToken"] = token
            page = self._client.list_schedules(**params)
            for item in page.get("Schedules", []):
                if item.get("State", "ENABLED") == "ENABLED":
                    live[item["Name"]] = item.get("LastModificationDate")
            token = page.get("NextToken")
            if not token:
                break
        for gone in set(self._tracked) - set(live):
            del self._tracked[gone]
        for name, modified in live.items():
            known = self._tracked.get(name)
            if known is not None and known.modified == modified:
                continue
            try:
                found = self._client.get_schedule(Name=name, GroupName=self._group)
            except self._client.exceptions.ResourceNotFoundException:
                continue
            start = found.get("StartDate")
            tracked = _Tracked(
                modified=modified,
                expression=str(found.get("ScheduleExpression", "")),
                timezone=str(found.get("ScheduleExpressionTimezone") or "UTC"),
                start_ms=int(start.timestamp() * 1000) if isinstance(start, datetime) else None,
                template=str((found.get("Target") or {}).get("Input") or "{}"),
                one_shot=found.get("ActionAfterCompletion") == "DELETE",
                after_ms=now,  # a changed schedule fires from now on, as Scheduler does
            )
            tracked.next_ms = self._next(tracked)
            self._tracked[name] = tracked

    def _fire_safely(self, name: str, payload: dict[str, Any]) -> None:
        try:
            self._fire(payload)
        except Exception:
            _log.exception("schedule %s failed in the drive handler", name)

    def _delete(self, name: str) -> None:
        try:
            self._client.delete_schedule(Name=name, GroupName=self._group)
        except self._client.exceptions.ResourceNotFoundException:
            return
