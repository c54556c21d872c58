"""Five-field cron expressions: parsing, the refusal of ambiguous day rules, and translation
to (and back from) EventBridge Scheduler's six-field ``cron(...)`` expressions.

Fields: minute, hour, day of month, month, day of week (0-6 or 7 for Sunday, or ``SUN``-``SAT``;
months also ``JAN``-``DEC``). Each field takes ``*``, numbers, names, ranges ``a-b``, lists and
steps ``/n``. An expression restricting both day of month and day of week is refused: Unix cron
ORs the two, the reference runtime ANDs them and Scheduler forbids it, so any meaning would
surprise someone.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from croniter import croniter

from relayflow.errors import ValidationError

FIELD_NAMES = ("minute", "hour", "day of month", "month", "day of week")
_RANGES = ((0, 59), (0, 23), (1, 31), (1, 12), (0, 6))
_FIELD = re.compile(
    r"^(\*|[0-9A-Za-z]+(-[0-9A-Za-z]+)?)(/[0-9]+)?(,(\*|[0-9A-Za-z]+(-[0-9A-Za-z]+)?)(/[0-9]+)?)*$"
)
_WEEKDAYS = ("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT")
_MONTHS = ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC")
_NAMES: dict[int, tuple[str, ...]] = {3: _MONTHS, 4: _WEEKDAYS}
_WORD = re.compile(r"[A-Za-z]+")
_SCHEDULER_CRON = re.compile(r"^cron\((.+)\)$")


@dataclass(frozen=True)
class CronExpression:
    """A parsed five-field cron expression.

    Attributes:
        source: The expression as written.
        fields: The values each field matches, sorted (day of week 0-6, Sunday 0).
    """

    source: str
    fields: tuple[tuple[int, ...], ...]

    @property
    def restricts_day_of_month(self) -> bool:
        """True unless the day-of-month field matches every day."""
        return self.fields[2] != _full(2)

    @property
    def restricts_day_of_week(self) -> bool:
        """True unless the day-of-week field matches every weekday."""
        return self.fields[4] != _full(4)

    def unix(self) -> str:
        """The canonical five-field form (numbers, ``*`` for unrestricted fields)."""
        return " ".join(_render(i, values, names=False) for i, values in enumerate(self.fields))

    def scheduler_expression(self) -> str:
        """Scheduler's ``cron(minutes hours day-of-month month day-of-week year)``.

        The day field that is not restricted becomes ``?`` (Scheduler needs exactly one);
        weekdays are written as names, so Unix's 0-6 and Scheduler's 1-7 cannot be confused.
        """
        minute, hour, dom, month, dow = (
            _render(i, values, names=True) for i, values in enumerate(self.fields)
        )
        if self.restricts_day_of_week:
            dom = "?"
        else:
            dow = "?"
        return f"cron({minute} {hour} {dom} {month} {dow} *)"


def _full(index: int) -> tuple[int, ...]:
    low, high = _RANGES[index]
    return tuple(range(low, high + 1))


def parse_cron(expression: str) -> CronExpression:
    """Parse and check a five-field cron expression.

    Raises:
        ValidationError: Not five fields, a value out of range, an unsupported construct
            (``L``, ``W``, ``#``, ``?``, macros), or both day fields restricted.
    """
    if not isinstance(expression, str):
        raise ValidationError(f"a cron expression must be a string, got {expression!r}")
    parts = expression.split()
    if len(parts) != 5:
        raise ValidationError(
            f"cron expression {expression!r} must have five fields "
            "(minute hour day-of-month month day-of-week), got {len(parts)}"
        )
    for index, (name, part) in enumerate(zip(FIELD_NAMES, parts, strict=True)):
        words = _WORD.findall(part)
        if not _FIELD.match(part) or any(w.upper() not in _NAMES.get(index, ()) for w in words):
            raise ValidationError(f"cron expression {expression!r}: bad {name} field {part!r}")
    try:
        expanded, nth = croniter.expand(" ".join(parts))
    except Exception as exc:  # croniter raises its own error types for bad values
        raise ValidationError(f"cron expression {expression!r} is invalid: {exc}") from exc
    if nth:
        raise ValidationError(f"cron expression {expression!r}: '#' is not supported")
    fields: list[tuple[int, ...]] = []
    for index, values in enumerate(expanded):
        if values == ["*"]:
            fields.append(_full(index))
            continue
        numbers = sorted({int(v) % 7 if index == 4 else int(v) for v in values})
        low, high = _RANGES[index]
        if not numbers or numbers[0] < low or numbers[-1] > high:
            raise ValidationError(
                f"cron expression {expression!r}: {FIELD_NAMES[index]} out of range"
            )
        fields.append(tuple(numbers))
    parsed = CronExpression(source=expression, fields=tuple(fields))
    if parsed.restricts_day_of_month and parsed.restricts_day_of_week:
        raise ValidationError(
            f"cron expression {expression!r} restricts both day of month and day of week; "
            "restrict one and use * for the other (Unix cron would OR them, other runtimes "
            "AND them, and EventBridge Scheduler refuses the combination)"
        )
    return parsed


def _render(index: int, values: tuple[int, ...], *, names: bool) -> str:
    if values == _full(index):
        return "*"
    high = _RANGES[index][1]
    if index in (0, 1) and len(values) >= 3:
        step = values[1] - values[0]
        if step > 1 and values == tuple(range(values[0], high + 1, step)):
            return f"{values[0]}/{step}"

    def label(value: int) -> str:
        return _WEEKDAYS[value] if names and index == 4 else str(value)

    pieces: list[str] = []
    start = prev = values[0]
    for value in (*values[1:], None):
        if value is not None and value == prev + 1:
            prev = value
            continue
        if prev - start >= 2:
            pieces.append(f"{label(start)}-{label(prev)}")
        else:
            pieces.extend(label(v) for v in range(start, prev + 1))
        if value is not None:
            start = prev = value
    return ",".join(pieces)


def scheduler_to_unix(expression: str) -> str:
    """The five-field Unix form of a Scheduler ``cron(...)`` expression this module wrote.

    The year must be ``*``; ``?`` becomes ``*``. Used to evaluate schedules read back from
    Scheduler (the local stack fires them) and to check translations.

    Raises:
        ValidationError: Not a six-field ``cron(...)`` with any year.
    """
    match = _SCHEDULER_CRON.match(expression.strip())
    parts = match.group(1).split() if match else []
    if len(parts) != 6 or parts[5] != "*":
        raise ValidationError(f"not a Scheduler cron expression for every year: {expression!r}")
    return " ".join("*" if part == "?" else part for part in parts[:5])
