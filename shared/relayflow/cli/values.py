"""Parsing of command-line values: JSON given inline or as ``@file``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


class UsageError(Exception):
    """A command-line value is unusable; the command exits with status 2."""


def parse_json_arg(text: str | None, *, what: str, default: Any = None) -> Any:
    """Decode ``text`` as JSON, or the JSON file it names with a leading ``@``.

    Args:
        text: The raw argument (``'{"a": 1}'`` or ``@input.json``), or None.
        what: The option's name, for the error message.
        default: The value when ``text`` is None.

    Raises:
        UsageError: The file cannot be read or the text is not JSON.
    """
    if text is None:
        return default
    source = text
    if text.startswith("@"):
        path = Path(text[1:])
        try:
            source = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise UsageError(f"{what}: cannot read {path}: {exc.strerror or exc}") from exc
    try:
        return json.loads(source)
    except json.JSONDecodeError as exc:
        raise UsageError(f"{what}: not valid JSON ({exc.msg} at position {exc.pos})") from exc
