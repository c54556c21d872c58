"""One declaration per setting: :func:`setting` makes a dataclass field carrying its variable,
parser and meaning; reading the environment and the docs table are derived from those fields.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar, cast

from relayflow.settings.parsers import Parser, Raw, env_text, shown_default

T = TypeVar("T")

#: The key of a setting's :class:`Spec` in its dataclass field's metadata.
SETTING = "relayflow.setting"
TABLE_START = "<!-- settings-table:start -->"
TABLE_END = "<!-- settings-table:end -->"


@dataclass(frozen=True)
class Variable:
    """One row of the settings table: a variable, its default as shown, and what it means."""

    name: str
    doc: str
    shown: str = "—"


@dataclass(frozen=True)
class Spec:
    """What a setting's field declares besides its default.

    Attributes:
        variable: The environment variable holding it.
        doc: One line saying what it does, for the settings table.
        parse: Turns the variable's text into the value; refuses unusable text.
        shown: The default as the settings table shows it.
        fallbacks: Variables read, in order, when ``variable`` is unset.
        companions: Variables the parser also reads (documented in rows of their own).
    """

    variable: str
    doc: str
    parse: Parser[Any]
    shown: str
    fallbacks: tuple[str, ...] = ()
    companions: tuple[Variable, ...] = ()

    def rows(self) -> list[Variable]:
        """This setting's rows of the settings table: its own, then its companions'."""
        return [Variable(self.variable, self.doc, self.shown), *self.companions]


def setting(
    variable: str,
    default: T,
    parse: Parser[T],
    doc: str,
    *,
    shown: str | None = None,
    fallbacks: tuple[str, ...] = (),
    companions: tuple[Variable, ...] = (),
) -> T:
    """Declare a dataclass field read from ``variable`` (``default`` when it is unset).

    A mutable default (a dict) is copied for each instance.
    """
    spec = Spec(
        variable=variable,
        doc=doc,
        parse=parse,
        shown=shown if shown is not None else shown_default(parse, default),
        fallbacks=fallbacks,
        companions=companions,
    )
    metadata = {SETTING: spec}
    if isinstance(default, dict):
        initial = dict(default)
        return cast(T, dataclasses.field(default_factory=lambda: dict(initial), metadata=metadata))
    return dataclasses.field(default=default, metadata=metadata)


def specs(cls: type[Any]) -> dict[str, Spec]:
    """Field name → :class:`Spec` of every declared setting of the dataclass ``cls``."""
    return {
        field.name: field.metadata[SETTING]
        for field in dataclasses.fields(cls)
        if SETTING in field.metadata
    }


def read_field(spec: Spec, env: Mapping[str, str]) -> Any:
    """The value ``env`` gives the setting, or ``dataclasses.MISSING`` when it gives none.

    Raises:
        ValidationError: The variable's text cannot be used (the message names it).
    """
    for name in (spec.variable, *spec.fallbacks):
        value = env_text(env, name)
        if value is not None:
            return spec.parse(Raw(name=name, text=value, env=env))
    return dataclasses.MISSING


def read_fields(cls: type[Any], env: Mapping[str, str]) -> dict[str, Any]:
    """The keyword arguments of ``cls`` that ``env`` sets (unset ones keep their default)."""
    found = {name: read_field(spec, env) for name, spec in specs(cls).items()}
    return {name: value for name, value in found.items() if value is not dataclasses.MISSING}


def render_table(rows: Iterable[Variable]) -> str:
    """A Markdown table ``| Variable | Default | Meaning |`` of ``rows``."""
    lines = ["| Variable | Default | Meaning |", "|---|---|---|"]
    lines += [f"| `{row.name}` | {row.shown} | {row.doc} |" for row in rows]
    return "\n".join(lines) + "\n"


def marked_table(document: str) -> str:
    """The text between the settings-table markers of ``document``.

    Raises:
        ValueError: ``document`` lacks a marker.
    """
    start = document.find(TABLE_START)
    end = document.find(TABLE_END)
    if start < 0 or end < start:
        raise ValueError(f"expected {TABLE_START} ... {TABLE_END} in the document")
    return document[start + len(TABLE_START) : end].strip("\n") + "\n"


def rewrite_marked_table(path: Path, table: str) -> bool:
    """Put ``table`` between the markers of the file at ``path``; True when it changed."""
    document = path.read_text(encoding="utf-8")
    if marked_table(document) == table:
        return False
    head, _, rest = document.partition(TABLE_START)
    _, _, tail = rest.partition(TABLE_END)
    path.write_text(f"{head}{TABLE_START}\n{table}{TABLE_END}{tail}", encoding="utf-8")
    return True
