"""``Schedule``: one recurring (or one-shot) schedule declared on a workflow, in the
reference's shape: exactly one of ``cron``, ``every`` or ``at``, plus optional ``timezone``,
``input``, ``enabled``, ``overlap``, ``environments`` and ``name``.

A declaration keeps exactly the keys its author gave, so the manifest entry it writes
(``workflows[].schedules[]``) is the reference's JSON and manifest ids stay comparable.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from relayflow.errors import ValidationError
from relayflow.events.canonical import short_hash
from relayflow.json_values import non_json_reason
from relayflow.protocol import ENVIRONMENTS
from relayflow.schedules.cron import CronExpression, parse_cron
from relayflow.schedules.times import parse_iso_ms, rate_expression, zone
from relayflow.sdk.durations import parse_duration

Overlap = Literal["skip", "queue", "allow"]
OVERLAPS: tuple[Overlap, ...] = ("skip", "queue", "allow")
Kind = Literal["cron", "every", "at"]
KINDS: tuple[Kind, ...] = ("cron", "every", "at")
_KEYS = frozenset({*KINDS, "timezone", "input", "enabled", "overlap", "environments", "name"})


def _js_date(moment: datetime) -> str:
    """A datetime as JavaScript's ``Date.toJSON`` writes it (UTC, milliseconds, ``Z``)."""
    utc = moment.astimezone(UTC)
    return utc.strftime("%Y-%m-%dT%H:%M:%S.") + f"{utc.microsecond // 1000:03d}Z"


@dataclass(frozen=True)
class Schedule:
    """A schedule declaration; build it with :meth:`cron`, :meth:`every` or :meth:`at`.

    Attributes:
        declaration: The reference-shaped dict, exactly as it enters the manifest.
    """

    declaration: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "declaration", _checked(self.declaration))

    # ----- constructors -------------------------------------------------------------------

    @classmethod
    def cron(cls, expression: str, **options: Any) -> Schedule:
        """A five-field cron schedule, e.g. ``Schedule.cron("0 9 * * MON-FRI",
        timezone="Europe/Berlin")``.

        Options: ``timezone`` (IANA name, UTC by default), ``input`` (JSON value given to each
        run), ``enabled``, ``overlap`` (``skip`` | ``queue`` | ``allow``), ``environments``,
        ``name``.
        """
        return cls({"cron": expression, **_options(options)})

    @classmethod
    def every(cls, interval: str | int, **options: Any) -> Schedule:
        """A fixed interval (``"15m"``, ``"1h"``, ``"1d"`` or ms), first firing one interval
        after the schedule is first registered. Intervals are whole minutes."""
        return cls({"every": interval, **_options(options)})

    @classmethod
    def at(cls, when: datetime | str, **options: Any) -> Schedule:
        """One firing at ``when`` (an aware datetime, or ISO 8601 text; text without an
        offset is read in ``timezone``). A time already past never fires."""
        if isinstance(when, datetime):
            if when.tzinfo is None:
                tz = options.get("timezone")
                if tz is None:
                    raise ValidationError("Schedule.at needs an aware datetime (or give timezone=)")
                when = when.replace(tzinfo=zone(tz))
            value: str = _js_date(when)
        else:
            value = when
        return cls({"at": value, **_options(options)})

    @classmethod
    def from_value(cls, value: Schedule | Mapping[str, Any]) -> Schedule:
        """A :class:`Schedule` from itself or the reference's dict form."""
        if isinstance(value, Schedule):
            return value
        if isinstance(value, Mapping):
            return cls(dict(value))
        raise ValidationError(f"a schedule must be a Schedule or a dict, got {value!r}")

    # ----- reading ------------------------------------------------------------------------

    @property
    def kind(self) -> Kind:
        """``cron``, ``every`` or ``at``."""
        return next(k for k in KINDS if k in self.declaration)

    @property
    def timezone(self) -> str | None:
        """The declared IANA time zone (None: UTC)."""
        tz = self.declaration.get("timezone")
        return tz if isinstance(tz, str) else None

    @property
    def overlap(self) -> Overlap:
        """What a firing does while the previous run is still going (``skip`` by default)."""
        value = self.declaration.get("overlap", "skip")
        return value if value in OVERLAPS else "skip"

    @property
    def enabled(self) -> bool:
        """False when declared ``enabled: false``."""
        return self.declaration.get("enabled", True) is not False

    @property
    def name(self) -> str | None:
        """The declared name."""
        name = self.declaration.get("name")
        return name if isinstance(name, str) else None

    @property
    def input(self) -> Any:
        """The input each fired run gets (None when not declared)."""
        return self.declaration.get("input")

    def applies_to(self, environment: str) -> bool:
        """Enabled and (when ``environments`` is declared) listing ``environment``."""
        envs = self.declaration.get("environments")
        return self.enabled and (envs is None or environment in envs)

    def cron_expression(self) -> CronExpression:
        """The parsed cron expression (only for ``cron`` schedules)."""
        return parse_cron(str(self.declaration["cron"]))

    def interval_ms(self) -> int:
        """The interval in ms (only for ``every`` schedules)."""
        return parse_duration(self.declaration["every"])

    def at_ms(self) -> int:
        """The one firing time in epoch ms (only for ``at`` schedules)."""
        return parse_iso_ms(str(self.declaration["at"]), self.timezone)

    def schedule_id(self, workflow_id: str) -> str:
        """The schedule's id: from the workflow and its name, or (unnamed) its timing.

        Unnamed schedules are identified by what makes them fire (kind, value, time zone):
        editing their input keeps the id, editing their timing makes a new schedule. Name a
        schedule to keep its id (and its pause) across timing changes.
        """
        if self.name is not None:
            basis: dict[str, Any] = {"workflowId": workflow_id, "name": self.name}
        else:
            basis = {
                "workflowId": workflow_id,
                self.kind: self.declaration[self.kind],
                "timezone": self.timezone,
            }
        return f"sch_{short_hash(basis)}"

    def to_manifest(self) -> dict[str, Any]:
        """The manifest entry (a JSON copy of the declaration)."""
        copied: dict[str, Any] = json.loads(json.dumps(dict(self.declaration)))
        return copied


def _options(options: Mapping[str, Any]) -> dict[str, Any]:
    unknown = set(options) - _KEYS
    if unknown:
        raise ValidationError(f"unknown schedule option(s): {', '.join(sorted(unknown))}")
    return {
        k: (list(v) if k == "environments" and isinstance(v, tuple) else v)
        for k, v in options.items()
    }


def _checked(declaration: Mapping[str, Any]) -> dict[str, Any]:
    """Validate a reference-shaped declaration; returns a plain dict copy."""
    if not isinstance(declaration, Mapping):
        raise ValidationError(f"a schedule must be an object, got {declaration!r}")
    data = dict(declaration)
    unknown = set(data) - _KEYS
    if unknown:
        raise ValidationError(f"unknown schedule key(s): {', '.join(sorted(unknown))}")
    kinds = [k for k in KINDS if k in data]
    if len(kinds) != 1:
        raise ValidationError("a schedule needs exactly one of cron, every or at")
    tz = data.get("timezone")
    if tz is not None:
        if not isinstance(tz, str):
            raise ValidationError(f"schedule timezone must be a string, got {tz!r}")
        zone(tz)
    kind = kinds[0]
    if kind == "cron":
        parse_cron(data["cron"])
    elif kind == "every":
        value = data["every"]
        if isinstance(value, bool) or not isinstance(value, str | int):
            raise ValidationError(f"schedule every must be a duration, got {value!r}")
        try:
            interval = parse_duration(value)
        except (ValueError, ValidationError) as exc:
            raise ValidationError(f"schedule every: {exc}") from exc
        rate_expression(interval)
    else:
        if not isinstance(data["at"], str):
            raise ValidationError(f"schedule at must be a time, got {data['at']!r}")
        parse_iso_ms(data["at"], tz)
    if "enabled" in data and not isinstance(data["enabled"], bool):
        raise ValidationError(f"schedule enabled must be true or false, got {data['enabled']!r}")
    if "overlap" in data and data["overlap"] not in OVERLAPS:
        raise ValidationError(
            f"schedule overlap must be one of {', '.join(OVERLAPS)}, got {data['overlap']!r}"
        )
    if "environments" in data:
        envs = data["environments"]
        if not isinstance(envs, list | tuple) or any(e not in ENVIRONMENTS for e in envs):
            raise ValidationError(
                f"schedule environments must list {', '.join(ENVIRONMENTS)}, got {envs!r}"
            )
        data["environments"] = list(envs)
    if "name" in data and (not isinstance(data["name"], str) or not data["name"]):
        raise ValidationError(f"schedule name must be a non-empty string, got {data['name']!r}")
    if "input" in data:
        if callable(data["input"]):
            raise ValidationError(
                "schedule input must be a JSON value: schedules fire outside the process "
                "that declared them, so a function cannot be called there"
            )
        reason = non_json_reason(data["input"])
        if reason is not None:
            raise ValidationError(f"schedule input is not JSON: {reason}")
    return data


def schedules_from(value: Any) -> tuple[Schedule, ...]:
    """``@workflow(schedule=...)``: one declaration, a list of them, or None."""
    if value is None:
        return ()
    if isinstance(value, Schedule | Mapping):
        return (Schedule.from_value(value),)
    if isinstance(value, Sequence | Iterable) and not isinstance(value, str | bytes):
        return tuple(Schedule.from_value(item) for item in value)
    raise ValidationError(f"schedule must be a Schedule, a dict or a list of them, got {value!r}")
