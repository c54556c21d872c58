"""Settings declared once each: a dataclass field carries its variable, default, parser and
meaning, and the reading, the variable list, the error messages and the docs table derive from
it. :mod:`relayflow.config` declares the deployment's settings with these pieces."""

from relayflow.settings.declare import (
    SETTING,
    TABLE_END,
    TABLE_START,
    Spec,
    Variable,
    marked_table,
    read_field,
    read_fields,
    render_table,
    rewrite_marked_table,
    setting,
    specs,
)
from relayflow.settings.parsers import DispatchTarget, Raw

__all__ = [
    "SETTING",
    "TABLE_END",
    "TABLE_START",
    "DispatchTarget",
    "Raw",
    "Spec",
    "Variable",
    "marked_table",
    "read_field",
    "read_fields",
    "render_table",
    "rewrite_marked_table",
    "setting",
    "specs",
]
