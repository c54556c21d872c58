"""When schedules fire: cron in a time zone (with the daylight-saving rule), fixed intervals
from an anchor, and one-shot times; also for expressions read back from Scheduler.

The daylight-saving rule is EventBridge Scheduler's: a wall-clock time that does not exist
(the hour skipped when clocks go forward) does not fire that day; a wall-clock time that
happens twice (the hour repeated when clocks go back) fires once, at its first occurrence.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import croniter

from relayflow.errors import ValidationError
from relayflow.schedules.cron import CronExpression, parse_cron, scheduler_to_unix

_RATE = re.compile(r"^rate\((\d+) (minute|minutes|hour|hours|day|days)\)$")
_AT = re.compile(r"^at\((\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})\)$")
_UNIT_MS = {"minute": 60_000, "hour": 3_600_000, "day": 86_400_000}
_SEARCH_LIMIT = 100_000


def zone(name: str | None) -> ZoneInfo:
    """The IANA time zone ``name`` (UTC when None).

    Raises:
        ValidationError: Unknown zone.
    """
    if name is None:
        return ZoneInfo("UTC")
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ValidationError(f"unknown time zone {name!r}") from exc


def _instant(local: datetime, tz: ZoneInfo) -> datetime | None:
    """The UTC instant of naive wall time ``local`` in ``tz``; None when it does not exist."""
    first = local.replace(tzinfo=tz, fold=0)
    utc = first.astimezone(UTC)
    if utc.astimezone(tz).replace(tzinfo=None) != local:
        return None  # skipped by a daylight-saving jump
    return utc


def cron_fire_times(
    cron: CronExpression | str, timezone: str | None, after_ms: int, count: int
) -> list[int]:
    """The next ``count`` fire times (epoch ms) strictly after ``after_ms``."""
    parsed = parse_cron(cron) if isinstance(cron, str) else cron
    tz = zone(timezone)
    start = datetime.fromtimestamp(after_ms / 1000, tz=UTC).astimezone(tz)
    # Search from an hour before in wall time so a repeated hour is never jumped over.
    local = start.replace(tzinfo=None) - timedelta(hours=1)
    iterator = croniter(parsed.unix(), local)
    out: list[int] = []
    for _ in range(_SEARCH_LIMIT):
        if len(out) >= count:
            break
        candidate = iterator.get_next(datetime)
        instant = _instant(candidate, tz)
        if instant is None:
            continue
        ms = int(instant.timestamp() * 1000)
        if ms > after_ms and (not out or ms > out[-1]):
            out.append(ms)
    return out


def interval_fire_times(anchor_ms: int, interval_ms: int, after_ms: int, count: int) -> list[int]:
    """``anchor + k * interval`` (k >= 1) strictly after ``after_ms``, ``count`` of them."""
    if interval_ms <= 0:
        raise ValidationError("an interval must be positive")
    k = max(1, (after_ms - anchor_ms) // interval_ms + 1)
    return [anchor_ms + (k + i) * interval_ms for i in range(count)]


def rate_expression(interval_ms: int) -> str:
    """Scheduler's ``rate(n unit)`` for a whole number of minutes (largest exact unit)."""
    if interval_ms <= 0 or interval_ms % 60_000:
        raise ValidationError(
            f"an interval of {interval_ms} ms is not a whole number of minutes "
            "(EventBridge Scheduler's rate schedules count minutes, hours or days)"
        )
    for unit in ("day", "hour", "minute"):
        size = _UNIT_MS[unit]
        if interval_ms % size == 0:
            value = interval_ms // size
            return f"rate({value} {unit}{'s' if value != 1 else ''})"
    raise AssertionError("unreachable: minutes divide every interval here")


def at_expression(at_ms: int) -> str:
    """Scheduler's ``at(yyyy-mm-ddThh:mm:ss)`` in UTC (rounded up to the second)."""
    seconds = -(-at_ms // 1000)
    return f"at({datetime.fromtimestamp(seconds, tz=UTC).strftime('%Y-%m-%dT%H:%M:%S')})"


def expression_interval_ms(expression: str) -> int | None:
    """The interval of a ``rate(...)`` expression in ms; None for other expressions."""
    rate = _RATE.match(expression)
    return int(rate.group(1)) * _UNIT_MS[rate.group(2).rstrip("s")] if rate else None


def expression_fire_times(
    expression: str, timezone: str | None, start_ms: int | None, after_ms: int, count: int
) -> list[int]:
    """Fire times of a Scheduler expression (``cron``, ``rate`` or ``at``) after ``after_ms``.

    ``start_ms`` is the schedule's start date: a rate schedule fires at it and every interval
    after it; cron and one-time schedules never fire before it.
    """
    rate = _RATE.match(expression)
    if rate is not None:
        interval = int(rate.group(1)) * _UNIT_MS[rate.group(2).rstrip("s")]
        if start_ms is None:
            raise ValidationError("a rate schedule needs a start date here")
        return interval_fire_times(start_ms - interval, interval, after_ms, count)
    floor = max(after_ms, start_ms - 1) if start_ms is not None else after_ms
    at = _AT.match(expression)
    if at is not None:
        local = datetime.strptime(at.group(1), "%Y-%m-%dT%H:%M:%S")
        instant = _instant(local, zone(timezone))
        if instant is None:
            return []
        ms = int(instant.timestamp() * 1000)
        return [ms] if ms > floor and count > 0 else []
    return cron_fire_times(scheduler_to_unix(expression), timezone, floor, count)


def iso_utc(ms: int) -> str:
    """``2026-05-09T13:22:08Z``-style UTC text (milliseconds shown only when not zero)."""
    stamp = datetime.fromtimestamp(ms / 1000, tz=UTC)
    if ms % 1000:
        return stamp.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"
    return stamp.strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_iso_ms(text: str, timezone: str | None = None) -> int:
    """Epoch ms of an ISO 8601 time; one without an offset is read in ``timezone`` (UTC).

    Raises:
        ValidationError: Not an ISO 8601 time.
    """
    try:
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except (TypeError, ValueError) as exc:
        raise ValidationError(f"not an ISO 8601 time: {text!r}") from exc
    if parsed.tzinfo is None:
        instant = _instant(parsed, zone(timezone))
        if instant is None:
            raise ValidationError(f"{text!r} does not exist in {timezone} (daylight saving)")
        parsed = instant
    return int(parsed.timestamp() * 1000)
