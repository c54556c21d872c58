"""The local stand-in for EventBridge Scheduler firing: moto stores schedules but never fires
them, so this loop reads the group's one-time schedules and fires each due one into the
drive handler, deleting it first as ``ActionAfterCompletion=DELETE`` would.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from botocore.exceptions import ClientError

from relayflow.local.polling import PollingThread

_log = logging.getLogger("relayflow.local")
_AT = re.compile(r"^at\((\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})\)$")

Fire = Callable[[dict[str, Any]], None]
#: Error codes of a page token that no longer points anywhere (moto's, and Scheduler's).
_STALE = frozenset({"InvalidToken", "ValidationException"})
#: Listings started over in one poll before it gives up until the next.
_LIST_ATTEMPTS = 5


@dataclass(frozen=True)
class _Known:
    modified: Any
    due_ms: int | None
    payload: dict[str, Any] | None


def due_time_ms(expression: str, payload: Mapping[str, Any] | None) -> int | None:
    """When a one-time schedule is due: the payload's ``wakeAt`` (ms), else its ``at()``.

    Scheduler fires ``at()`` schedules with up to a minute of delay; the local stack fires at
    the exact wake time the alarm carries, which an early or late alarm tolerates either way.
    """
    wake = payload.get("wakeAt") if payload is not None else None
    if isinstance(wake, int) and not isinstance(wake, bool):
        return wake
    match = _AT.match(expression or "")
    if match is None:
        return None
    stamp = datetime.strptime(match.group(1), "%Y-%m-%dT%H:%M:%S").replace(tzinfo=UTC)
    return int(stamp.timestamp() * 1000)


class LocalScheduler:
    """Polls a schedule group and fires due one-time schedules.

    Args:
        client: A boto3 EventBridge Scheduler client (on moto).
        group: The schedule group the alarm clock arms into.
        fire: Called with the schedule's target input (``{"runId", "wakeAt"}``), on a worker
            thread, like an asynchronous Lambda invocation.
        now_ms: Wall clock in epoch ms.
        interval_s: Pause between polls.
        wait_turn: Called before each poll; may block (see :class:`PollingThread`).
        workers: Alarms fired concurrently at most.
    """

    def __init__(
        self,
        *,
        client: Any,
        group: str,
        fire: Fire,
        now_ms: Callable[[], int],
        interval_s: float = 0.2,
        wait_turn: Callable[[], object] = lambda: None,
        workers: int = 4,
    ) -> None:
        self._client = client
        self._group = group
        self._fire = fire
        self._now_ms = now_ms
        self._known: dict[str, _Known] = {}
        self._polling = PollingThread(
            "relayflow-scheduler", self._poll, interval_s, wait_turn=wait_turn
        )
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="relayflow-alarm")

    def start(self) -> None:
        """Poll in a background thread until :meth:`stop`."""
        self._polling.start()

    def stop(self) -> None:
        """Stop polling and wait for alarms being fired to finish."""
        self._polling.stop()
        self._pool.shutdown(wait=True, cancel_futures=True)

    def _poll(self) -> bool:
        self.tick(wait=False)
        return False  # due times are polled at the interval, never back to back

    def tick(self, *, wait: bool = True) -> list[str]:
        """Fire every schedule due now; returns their names.

        Args:
            wait: Wait for the fired alarms to be handled (tests); the loop does not.
        """
        now = self._now_ms()
        fired: list[str] = []
        futures = []
        for name, modified in self._list():
            known = self._known.get(name)
            if known is None or known.modified != modified:
                known = self._read(name, modified)
                if known is None:
                    continue
                self._known[name] = known
            if known.due_ms is None or known.due_ms > now or known.payload is None:
                continue
            if not self._delete(name):
                continue
            self._known.pop(name, None)
            fired.append(name)
            futures.append(self._pool.submit(self._fire_safely, name, known.payload))
        if wait:
            for future in futures:
                future.result()
        return fired

    def _fire_safely(self, name: str, payload: dict[str, Any]) -> None:
        try:
            self._fire(payload)
        except Exception:
            _log.exception("alarm %s failed in the drive handler", name)

    def _list(self) -> list[tuple[str, Any]]:
        for _ in range(_LIST_ATTEMPTS):
            out = self._list_once()
            if out is not None:
                live = {name for name, _ in out}
                for gone in set(self._known) - live:
                    del self._known[gone]
                return out
        _log.warning("the schedules of %s kept changing while listed; next poll", self._group)
        return []

    def _list_once(self) -> list[tuple[str, Any]] | None:
        """Every enabled schedule, or None when a page token went stale meanwhile.

        moto's page token names the first schedule of the next page (Scheduler's tokens may
        expire too): when drives disarm alarms while a listing of more than a page is read
        (hundreds of alarms at once), the token is refused with ``InvalidToken``. The listing
        then starts over rather than end the poll with an error.
        """
        out: list[tuple[str, Any]] = []
        token: str | None = None
        while True:
            params: dict[str, Any] = {"GroupName": self._group, "MaxResults": 100}
            if token:
                params["NextToken"] = token
            try:
                page = self._client.list_schedules(**params)
            except ClientError as exc:
                if token is None or exc.response.get("Error", {}).get("Code") not in _STALE:
                    raise
                return None
            for item in page.get("Schedules", []):
                if item.get("State", "ENABLED") == "ENABLED":
                    out.append((item["Name"], item.get("LastModificationDate")))
            token = page.get("NextToken")
            if not token:
                return out

    def _read(self, name: str, modified: Any) -> _Known | None:
        try:
            schedule = self._client.get_schedule(Name=name, GroupName=self._group)
        except self._client.exceptions.ResourceNotFoundException:
            return None
        raw = (schedule.get("Target") or {}).get("Input")
        payload: dict[str, Any] | None = None
        if isinstance(raw, str):
            try:
                decoded = json.loads(raw)
            except ValueError:
                decoded = None
            payload = decoded if isinstance(decoded, dict) else None
        expression = str(schedule.get("ScheduleExpression") or "")
        return _Known(modified, due_time_ms(expression, payload), payload)

    def _delete(self, name: str) -> bool:
        try:
            self._client.delete_schedule(Name=name, GroupName=self._group)
        except self._client.exceptions.ResourceNotFoundException:
            return False  # disarmed meanwhile: nothing to fire
        return True
