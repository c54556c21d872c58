"""Canonical JSON and the content hashes built on it (SHA-256, short hash, filter hash), plus
``wire_json``, the byte-exact ``JSON.stringify`` text the reference puts on the wire.
``MISSING`` (JavaScript ``undefined``) is defined with the other JavaScript semantics in jsvalue.
"""

from __future__ import annotations

import hashlib
import math
from typing import Any

from relayflow.events.jsvalue import (
    MISSING,
    format_js_number,
    js_key_order,
    property_key,
    quote_json_string,
    to_float,
    utf16_sorted,
)

__all__ = [
    "MISSING",
    "canonical_json",
    "filter_hash",
    "sha256_hex",
    "short_hash",
    "wire_json",
]


def _number_text(value: int | float) -> str:
    x = to_float(value)
    if math.isnan(x) or math.isinf(x):
        return "null"
    return format_js_number(x)


def _unsupported(value: object) -> TypeError:
    return TypeError(f"{type(value).__name__} is not a JSON value")


def _canonical(value: Any, out: list[str]) -> None:
    if value is None or value is MISSING:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif isinstance(value, str):
        out.append(quote_json_string(value))
    elif isinstance(value, (int, float)):
        out.append(_number_text(value))
    elif isinstance(value, (list, tuple)):
        out.append("[")
        for i, item in enumerate(value):
            if i:
                out.append(",")
            _canonical(item, out)
        out.append("]")
    elif isinstance(value, dict):
        members = {property_key(k): v for k, v in value.items()}
        out.append("{")
        # Keys are sorted, then the rebuilt object lists array-index keys first (JS rule).
        for i, key in enumerate(js_key_order(utf16_sorted(members))):
            if i:
                out.append(",")
            out.append(quote_json_string(key))
            out.append(":")
            _canonical(members[key], out)
        out.append("}")
    else:
        raise _unsupported(value)


def canonical_json(value: Any) -> str:
    """The reference's canonical JSON text of ``value``.

    Object keys are sorted by UTF-16 code units (array-index keys first, ascending), at every
    depth; ``MISSING`` (``undefined``) becomes ``null`` everywhere, including as an object
    member, which is kept; non-finite numbers become ``null``; numbers print as JavaScript
    prints them; no whitespace.

    Args:
        value: A JSON-like value (dict, list, tuple, str, int, float, bool, None, MISSING).

    Returns:
        The canonical text.

    Raises:
        TypeError: ``value`` contains something that is not a JSON value.
    """
    out: list[str] = []
    _canonical(value, out)
    return "".join(out)


def sha256_hex(value: Any) -> str:
    """Lowercase hex SHA-256 of the UTF-8 bytes of ``canonical_json(value)``."""
    return hashlib.sha256(canonical_json(value).encode("utf-8")).hexdigest()


def short_hash(value: Any) -> str:
    """The first 16 hex characters of :func:`sha256_hex` (manifest ``versionId``)."""
    return sha256_hex(value)[:16]


def filter_hash(text: str) -> str:
    """The reference's 16-hex FNV-like hash of ``text`` (event filter ids: ``ef_<hash>``).

    Two 32-bit halves start at 0xcbf29ce4 / 0x84222325; each UTF-16 code unit is XORed into
    both, then the pair is multiplied by 0x1b3 with the low half's carry added to the high half.
    (Not FNV-1a-64: the 2**40 term of the prime is missing, as in the reference.)
    """
    hi = 0xCBF29CE4
    lo = 0x84222325
    data = text.encode("utf-16-le", "surrogatepass")
    for i in range(0, len(data), 2):
        c = data[i] | (data[i + 1] << 8)
        hi ^= c
        lo ^= c
        lo *= 0x1B3
        hi = (hi * 0x1B3 + (lo >> 32)) & 0xFFFFFFFF
        lo &= 0xFFFFFFFF
    return f"{hi:08x}{lo:08x}"


def _stringify(value: Any, out: list[str]) -> bool:
    """Append ``JSON.stringify`` text of ``value``; False when it has none (undefined)."""
    if value is MISSING:
        return False
    if value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif isinstance(value, str):
        out.append(quote_json_string(value))
    elif isinstance(value, (int, float)):
        out.append(_number_text(value))
    elif isinstance(value, (list, tuple)):
        out.append("[")
        for i, item in enumerate(value):
            if i:
                out.append(",")
            if not _stringify(item, out):
                out.append("null")
        out.append("]")
    elif isinstance(value, dict):
        members = {property_key(k): v for k, v in value.items()}
        out.append("{")
        first = True
        for key in js_key_order(members):
            item = members[key]
            if item is MISSING:
                continue
            if not first:
                out.append(",")
            first = False
            out.append(quote_json_string(key))
            out.append(":")
            _stringify(item, out)
        out.append("}")
    else:
        raise _unsupported(value)
    return True


def wire_json(value: Any) -> str | None:
    """``JSON.stringify(value)`` byte for byte: the text the reference sends and answers with.

    Object members keep their insertion order except that array-index keys come first
    (JavaScript property order); ``MISSING`` members are dropped, ``MISSING`` array items
    become ``null``; numbers print the JavaScript way.

    Returns:
        The JSON text, or None when ``value`` itself is ``MISSING`` (JSON has no text for it).

    Raises:
        TypeError: ``value`` contains something that is not a JSON value.
    """
    out: list[str] = []
    if not _stringify(value, out):
        return None
    return "".join(out)
