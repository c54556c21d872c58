"""How one environment variable's text becomes a setting's value, and how docs show a default.

Each parser gets the variable's stripped, non-empty text as a :class:`Raw` and refuses an
unusable one with a ``ValidationError`` that names the variable.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, TypeVar, cast

from relayflow.costs.prices import PriceTable, parse_price_table
from relayflow.errors import ValidationError

T = TypeVar("T")

DispatcherKind = Literal["inline", "lambda", "http"]
DISPATCHER_KINDS: tuple[str, ...] = ("inline", "lambda", "http")

_DURATION = re.compile(r"^\s*(\d+)\s*(ms|s|m|h|d|w)?\s*$")
_UNIT_MS = {"ms": 1, "s": 1_000, "m": 60_000, "h": 3_600_000, "d": 86_400_000, "w": 604_800_000}
_TRUE = ("true", "1", "yes", "on")
_FALSE = ("false", "0", "no", "off")


@dataclass(frozen=True)
class Raw:
    """A variable as set: its name (for error messages), its text and the whole environment
    (for a setting that also reads companion variables)."""

    name: str
    text: str
    env: Mapping[str, str]

    def companion(self, name: str) -> str | None:
        """Another variable's stripped text, or None when it is unset or blank."""
        return env_text(self.env, name)


Parser = Callable[[Raw], T]


def env_text(env: Mapping[str, str], name: str) -> str | None:
    """``name``'s stripped text, or None when it is unset or blank."""
    value = env.get(name, "").strip()
    return value or None


def text(raw: Raw) -> str:
    """The text as set."""
    return raw.text


def names(raw: Raw) -> tuple[str, ...]:
    """Comma-separated names, blanks and repeats left out, in the order given."""
    return tuple(dict.fromkeys(n.strip() for n in raw.text.split(",") if n.strip()))


def flag(raw: Raw) -> bool:
    """``true``/``1``/``yes``/``on`` or ``false``/``0``/``no``/``off``."""
    lowered = raw.text.lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise ValidationError(f"{raw.name} must be true or false, got {raw.text!r}")


def non_negative_int(raw: Raw) -> int:
    """A whole number, zero or more."""
    try:
        value = int(raw.text)
    except ValueError:
        raise ValidationError(f"{raw.name} must be an integer, got {raw.text!r}") from None
    if value < 0:
        raise ValidationError(f"{raw.name} must not be negative, got {value}")
    return value


def positive_int(raw: Raw) -> int:
    """A whole number, one or more."""
    value = non_negative_int(raw)
    if value == 0:
        raise ValidationError(f"{raw.name} must be a positive integer, got 0")
    return value


def positive_seconds(raw: Raw) -> float:
    """A finite number of seconds above zero."""
    try:
        value = float(raw.text)
    except ValueError:
        raise ValidationError(f"{raw.name} must be a number of seconds, got {raw.text!r}") from None
    if not value > 0 or value == float("inf"):
        raise ValidationError(f"{raw.name} must be a positive number of seconds, got {raw.text!r}")
    return value


def duration_ms(raw: Raw) -> int:
    """Milliseconds, or a whole number with a unit: ``750ms``, ``10s``, ``2m``, ``1h``, ``30d``."""
    match = _DURATION.match(raw.text)
    if match is None:
        raise ValidationError(
            f"{raw.name} must be milliseconds or a duration like 10s, 2m, got {raw.text!r}"
        )
    return int(match.group(1)) * _UNIT_MS[match.group(2) or "ms"]


def format_duration(ms: int) -> str:
    """``ms`` in the largest unit :func:`duration_ms` reads that divides it (``840000``: 14m)."""
    for unit in ("w", "d", "h", "m", "s"):
        if ms and ms % _UNIT_MS[unit] == 0:
            return f"{ms // _UNIT_MS[unit]}{unit}"
    return f"{ms}ms"


def one_of(*choices: str) -> Parser[str]:
    """A parser accepting exactly one of ``choices``."""

    def parse(raw: Raw) -> str:
        if raw.text not in choices:
            raise ValidationError(
                f"{raw.name} must be one of {', '.join(choices)}, got {raw.text!r}"
            )
        return raw.text

    return parse


@dataclass(frozen=True)
class DispatchTarget:
    """Where step requests of some workflows go.

    Attributes:
        kind: ``inline`` (same process), ``lambda`` or ``http``.
        target: The function name/ARN (``lambda``) or URL (``http``); empty for ``inline``.
    """

    kind: DispatcherKind
    target: str = ""

    @classmethod
    def parse(cls, value: Any, *, where: str) -> DispatchTarget:
        """Read ``"inline"``, ``"lambda:<name>"``, ``"http:<url>"`` or ``{"kind", "target"}``."""
        if isinstance(value, str):
            kind, _, target = value.partition(":")
        elif isinstance(value, dict) and isinstance(value.get("kind"), str):
            kind, target = value["kind"], value.get("target", "")
        else:
            raise ValidationError(
                f"{where}: expected 'inline', 'lambda:<function>', 'http:<url>' or "
                f'{{"kind": ..., "target": ...}}, got {value!r}'
            )
        kind = kind.strip()
        if kind not in DISPATCHER_KINDS:
            raise ValidationError(
                f"{where}: dispatcher kind must be one of {', '.join(DISPATCHER_KINDS)}, "
                f"got {kind!r}"
            )
        if not isinstance(target, str):
            raise ValidationError(f"{where}: target must be a string, got {target!r}")
        target = target.strip()
        if kind != "inline" and not target:
            raise ValidationError(f"{where}: a {kind} dispatcher needs a target")
        return cls(kind=cast(DispatcherKind, kind), target=target)


def default_dispatcher(function_variable: str, url_variable: str) -> Parser[DispatchTarget]:
    """The default dispatcher: its kind, with its target from the companion variable of that
    kind (``function_variable`` for ``lambda``, ``url_variable`` for ``http``)."""
    needed = {"lambda": function_variable, "http": url_variable}

    def parse(raw: Raw) -> DispatchTarget:
        kind = one_of(*DISPATCHER_KINDS)(raw)
        if kind == "inline":
            return DispatchTarget("inline")
        target = raw.companion(needed[kind])
        if target is None:
            raise ValidationError(f"{raw.name}={kind} needs {needed[kind]}")
        return DispatchTarget(cast(DispatcherKind, kind), target)

    return parse


def dispatcher_map(raw: Raw) -> dict[str, DispatchTarget]:
    """A JSON object of workflow id (or ``tenantScript``) to dispatcher."""
    try:
        parsed = json.loads(raw.text)
    except json.JSONDecodeError as exc:
        raise ValidationError(f"{raw.name} is not valid JSON: {exc.msg}") from None
    if not isinstance(parsed, dict):
        raise ValidationError(f"{raw.name} must be a JSON object of workflow id -> dispatcher")
    return {
        str(key): DispatchTarget.parse(value, where=f"{raw.name}[{key!r}]")
        for key, value in parsed.items()
    }


def price_table(raw: Raw) -> PriceTable:
    """A price table: a JSON object of its fields, or the path of a JSON file holding one."""
    return parse_price_table(raw.text, where=raw.name)


def shown_default(parse: Parser[Any], default: Any) -> str:
    """How the settings table shows ``default`` (in the form the variable takes)."""
    if default is None:
        return "—"
    if parse is duration_ms:
        return f"`{format_duration(int(default))}`"
    if isinstance(default, bool):
        return f"`{str(default).lower()}`"
    if isinstance(default, float):
        return f"`{default:g}`"
    if isinstance(default, DispatchTarget):
        return f"`{default.kind}`"
    if isinstance(default, Mapping):
        return f"`{json.dumps(dict(default))}`"
    if isinstance(default, tuple):
        return f"`{','.join(default)}`" if default else "—"
    return f"`{default}`"
