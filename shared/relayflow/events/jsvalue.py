"""JavaScript value semantics the reference relies on: ``undefined``, ``typeof``, number printing,
property-key order, UTF-16 string order and string conversion, for plain JSON-like values.

Numbers are IEEE doubles in the reference, so every int is compared and printed as a float64.
"""

from __future__ import annotations

import enum
import math
import re
from collections.abc import Iterable
from typing import Any, Final, Literal


class MissingType(enum.Enum):
    """Type of :data:`MISSING`, the stand-in for JavaScript ``undefined``."""

    MISSING = "MISSING"

    def __repr__(self) -> str:
        return "MISSING"

    def __bool__(self) -> bool:
        return False


MISSING: Final = MissingType.MISSING
"""JavaScript ``undefined``: "no value", distinct from ``None`` (JSON ``null``)."""

JsType = Literal["undefined", "object", "boolean", "number", "string", "function"]

_MAX_ARRAY_INDEX = 4294967294
_INDEX_RE = re.compile(r"(?:0|[1-9][0-9]*)\Z")
_HIGH_CHAR_RE = re.compile("[\ud800-\U0010ffff]")
_ESCAPE_RE = re.compile('[\ud800-\udbff][\udc00-\udfff]|["\\\\\x00-\x1f\ud800-\udfff]')
_SHORT_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r"}
_SHORT_ESCAPES["\t"] = "\\t"


def is_number(value: object) -> bool:
    """True for ints and floats (never bools): the values JavaScript calls numbers."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def is_js_object(value: object) -> bool:
    """True for values whose ``typeof`` is ``object`` and that are not null (dicts and lists)."""
    return isinstance(value, (dict, list, tuple))


def js_typeof(value: object) -> JsType:
    """The result of JavaScript ``typeof`` for a JSON-like Python value."""
    if value is MISSING:
        return "undefined"
    if value is None or isinstance(value, (dict, list, tuple)):
        return "object"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if callable(value):
        return "function"
    return "object"


def to_float(value: int | float) -> float:
    """The float64 a JavaScript engine would hold for ``value`` (huge ints become infinities)."""
    try:
        return float(value)
    except OverflowError:
        return math.inf if value > 0 else -math.inf


def format_js_number(value: int | float) -> str:
    """Print a number exactly as JavaScript's ``Number.prototype.toString`` does.

    Shortest round-trip digits (as Python's ``repr``), no ``.0`` on integral values, plain
    decimal notation for 1e-6 <= |x| < 1e21 and ``d.ddde±N`` outside it, ``-0`` as ``0``.
    """
    x = to_float(value)
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    if x == 0:
        return "0"
    sign = "-" if x < 0 else ""
    mantissa, _, exp_text = repr(abs(x)).partition("e")
    int_part, _, frac_part = mantissa.partition(".")
    digits = int_part + frac_part
    # n: position of the decimal point relative to the first significant digit.
    n = len(int_part) + (int(exp_text) if exp_text else 0)
    stripped = digits.lstrip("0")
    n -= len(digits) - len(stripped)
    s = stripped.rstrip("0")
    k = len(s)
    if k <= n <= 21:
        text = s + "0" * (n - k)
    elif 0 < n <= 21:
        text = s[:n] + "." + s[n:]
    elif -6 < n <= 0:
        text = "0." + "0" * (-n) + s
    else:
        e = n - 1
        exp = ("+" if e >= 0 else "-") + str(abs(e))
        text = (s if k == 1 else s[0] + "." + s[1:]) + "e" + exp
    return sign + text


def is_array_index(key: str) -> bool:
    """True when ``key`` is a canonical array index (``0``..``4294967294``, no sign or zeros)."""
    return bool(_INDEX_RE.match(key)) and int(key) <= _MAX_ARRAY_INDEX


def utf16_key(text: str) -> bytes:
    """A sort key ordering strings by UTF-16 code units, as JavaScript compares them."""
    return text.encode("utf-16-be", "surrogatepass")


def utf16_sorted(keys: Iterable[str]) -> list[str]:
    """``keys`` sorted by UTF-16 code units (JavaScript's default ``Array.prototype.sort``)."""
    items = list(keys)
    if any(_HIGH_CHAR_RE.search(k) for k in items):
        return sorted(items, key=utf16_key)
    # Below U+D800 code-point order and UTF-16 order agree.
    return sorted(items)


def js_key_order(keys: Iterable[str]) -> list[str]:
    """Order property keys the way a JavaScript object lists them.

    Array-index keys come first in ascending numeric order; the others keep the given order.
    """
    items = list(keys)
    indices = [k for k in items if is_array_index(k)]
    if not indices:
        return items
    indices.sort(key=int)
    return indices + [k for k in items if not is_array_index(k)]


def property_key(key: object) -> str:
    """The string a JavaScript object would use for ``key``."""
    return key if isinstance(key, str) else js_to_string(key)


def own_keys(value: dict[Any, Any] | list[Any] | tuple[Any, ...]) -> list[str]:
    """``Object.keys(value)``: JavaScript key order for dicts, index strings for lists."""
    if isinstance(value, dict):
        return js_key_order(property_key(k) for k in value)
    return [str(i) for i in range(len(value))]


def own_entries(value: dict[Any, Any] | list[Any] | tuple[Any, ...]) -> list[tuple[str, Any]]:
    """``Object.entries(value)`` in JavaScript key order."""
    if isinstance(value, dict):
        by_key = {property_key(k): v for k, v in value.items()}
        return [(k, by_key[k]) for k in js_key_order(by_key)]
    return [(str(i), v) for i, v in enumerate(value)]


def has_property(value: object, key: str) -> bool:
    """JavaScript ``key in value`` for an object value (own keys only; no prototype chain)."""
    if isinstance(value, dict):
        return key in value
    if isinstance(value, (list, tuple)):
        return is_array_index(key) and int(key) < len(value)
    return False


def get_property(value: object, key: str) -> Any:
    """``value[key]`` for a dict or list; :data:`MISSING` when absent."""
    if isinstance(value, dict):
        return value.get(key, MISSING)
    if isinstance(value, (list, tuple)):
        if is_array_index(key) and int(key) < len(value):
            return value[int(key)]
        return MISSING
    return MISSING


def js_to_string(value: object) -> str:
    """JavaScript ``String(value)`` (also what template literals do)."""
    if isinstance(value, str):
        return value
    if value is MISSING:
        return "undefined"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return format_js_number(value)
    if isinstance(value, (list, tuple)):
        return ",".join("" if v is None or v is MISSING else js_to_string(v) for v in value)
    if isinstance(value, dict):
        return "[object Object]"
    return str(value)


def quote_json_string(text: str) -> str:
    """``text`` as a JSON string literal the way ``JSON.stringify`` writes it.

    Only ``"``, ``\\`` and control characters are escaped; lone surrogates become lowercase
    ``\\udxxx`` escapes; everything else (non-ASCII, U+2028/2029, DEL) is written raw.
    """

    def replace(match: re.Match[str]) -> str:
        ch = match.group()
        if len(ch) == 2:
            # A surrogate pair held as two code points is one character to JavaScript.
            return ch.encode("utf-16-be", "surrogatepass").decode("utf-16-be")
        short = _SHORT_ESCAPES.get(ch)
        return short if short is not None else f"\\u{ord(ch):04x}"

    return '"' + _ESCAPE_RE.sub(replace, text) + '"'


def strict_equals(a: object, b: object) -> bool:
    """JavaScript ``a === b`` for JSON-like values (objects compare by identity)."""
    if a is MISSING or b is MISSING:
        return a is b
    if a is None or b is None:
        return a is b
    ta, tb = js_typeof(a), js_typeof(b)
    if ta != tb:
        return False
    if ta == "number":
        return to_float(a) == to_float(b)  # type: ignore[arg-type]
    if ta in ("string", "boolean"):
        return a == b
    return a is b


def js_less(a: str | int | float, b: str | int | float) -> bool:
    """JavaScript ``a < b`` for two strings (UTF-16 order) or two numbers."""
    if isinstance(a, str) and isinstance(b, str):
        if _HIGH_CHAR_RE.search(a) or _HIGH_CHAR_RE.search(b):
            return utf16_key(a) < utf16_key(b)
        return a < b
    return to_float(a) < to_float(b)  # type: ignore[arg-type]


def js_number_from_string(text: str) -> float:
    """JavaScript ``Number(text)``: trims whitespace, ``""`` is 0, hex/octal/binary prefixes.

    Returns NaN for text JavaScript cannot read as a number.
    """
    t = text.strip(_JS_WHITESPACE)
    if t == "":
        return 0.0
    if _RADIX_RE.match(t):
        base = {"x": 16, "o": 8, "b": 2}[t[1].lower()]
        return float(int(t[2:], base))
    if _DECIMAL_RE.match(t):
        if t.lstrip("+-") == "Infinity":
            return -math.inf if t.startswith("-") else math.inf
        return float(t)
    return math.nan


_JS_WHITESPACE = (
    "\t\n\v\f\r \u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008"
    "\u2009\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"
)
_RADIX_RE = re.compile(r"0(?:[xX][0-9a-fA-F]+|[oO][0-7]+|[bB][01]+)\Z")
_DECIMAL_RE = re.compile(r"[+-]?(?:Infinity|(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)\Z")
