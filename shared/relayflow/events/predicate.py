"""The ``where`` predicate DSL: evaluation against an event envelope and the static validator.

Operators: ``eq neq in gt gte lt lte exists not and or``; sides are ``{"path": ...}`` or
``{"lit": ...}``. Semantics and messages follow the reference evaluator exactly, including
its structural quirks (first operator in fixed order wins, short-circuiting, missing paths).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from relayflow.errors import PredicateEvalError
from relayflow.events.canonical import wire_json
from relayflow.events.jsvalue import (
    MISSING,
    has_property,
    is_js_object,
    js_less,
    js_to_string,
    js_typeof,
    own_keys,
    strict_equals,
    to_float,
)
from relayflow.events.paths import ROOTS, parse_path, resolve_path

OPERATORS = ("eq", "neq", "in", "gt", "gte", "lt", "lte", "exists", "not", "and", "or")
"""The closed operator set, in the order the evaluator tries them."""

_ORDERED = ("gt", "gte", "lt", "lte")
_ROOTS_TEXT = "data | metadata | name | emittedAt"


@dataclass(frozen=True)
class ValidationResult:
    """Outcome of a static check: ``ok`` and the messages, in depth-first order."""

    ok: bool
    errors: list[str] = field(default_factory=list)


# ---- evaluation ----------------------------------------------------------------------------


def _in_check(value: object, key: str) -> None:
    """JavaScript ``key in value`` throws on null and primitives: mirror that as an error."""
    if not is_js_object(value):
        shown = js_to_string(value) if value is not MISSING else "undefined"
        raise PredicateEvalError(f"Cannot use 'in' operator to search for '{key}' in {shown}")


def _element(value: object, index: int) -> Any:
    """``value[index]`` with JavaScript semantics on any value (reading null/undefined fails)."""
    if value is None or value is MISSING:
        shown = "null" if value is None else "undefined"
        raise PredicateEvalError(f"Cannot read properties of {shown} (reading '{index}')")
    if isinstance(value, (list, tuple)):
        return value[index] if index < len(value) else MISSING
    if isinstance(value, dict):
        return value.get(str(index), MISSING)
    if isinstance(value, str):
        units = value.encode("utf-16-le", "surrogatepass")
        if 2 * index + 1 < len(units):
            return units[2 * index : 2 * index + 2].decode("utf-16-le", "surrogatepass")
        return MISSING
    return MISSING


def _resolve_side(side: object, envelope: object) -> Any:
    _in_check(side, "lit")
    if has_property(side, "lit"):
        return side["lit"]  # type: ignore[index]
    if has_property(side, "path"):
        return resolve_path(side["path"], envelope)  # type: ignore[index]
    return MISSING


def _equals(a: object, b: object) -> bool:
    if a is MISSING or b is MISSING:
        return False
    if a is None and b is None:
        return True
    if a is None or b is None:
        return False
    if js_typeof(a) != js_typeof(b) or is_js_object(a):
        # Objects and arrays never compare equal, not even to themselves.
        return False
    return strict_equals(a, b)


def _compare(sides: object, envelope: object, op: str) -> bool:
    lhs = _resolve_side(_element(sides, 0), envelope)
    rhs = _resolve_side(_element(sides, 1), envelope)
    if lhs is MISSING or rhs is MISSING:
        return False
    kind = js_typeof(lhs)
    if kind != js_typeof(rhs) or kind not in ("number", "string"):
        return False
    if op == "gt":
        return js_less(rhs, lhs)
    if op == "lt":
        return js_less(lhs, rhs)
    if kind == "number" and (to_float(lhs) != to_float(lhs) or to_float(rhs) != to_float(rhs)):
        return False  # NaN is neither >= nor <= anything.
    if op == "gte":
        return not js_less(lhs, rhs)
    return not js_less(rhs, lhs)


def _evaluate(expr: object, envelope: object) -> bool:
    _in_check(expr, "eq")
    if has_property(expr, "eq"):
        args = expr["eq"]  # type: ignore[index]
        return _equals(
            _resolve_side(_element(args, 0), envelope), _resolve_side(_element(args, 1), envelope)
        )
    if has_property(expr, "neq"):
        args = expr["neq"]  # type: ignore[index]
        return not _equals(
            _resolve_side(_element(args, 0), envelope), _resolve_side(_element(args, 1), envelope)
        )
    if has_property(expr, "in"):
        args = expr["in"]  # type: ignore[index]
        lhs = _resolve_side(_element(args, 0), envelope)
        candidates = _element(args, 1)
        if not isinstance(candidates, (list, tuple)):
            raise PredicateEvalError("expr.in[1].map is not a function")
        # Every candidate is resolved before any comparison, as the reference does.
        resolved = [_resolve_side(c, envelope) for c in candidates]
        return any(_equals(lhs, c) for c in resolved)
    for op in _ORDERED:
        if has_property(expr, op):
            return _compare(expr[op], envelope, op)  # type: ignore[index]
    if has_property(expr, "exists"):
        return _resolve_side(expr["exists"], envelope) is not MISSING  # type: ignore[index]
    if has_property(expr, "not"):
        return not _evaluate(expr["not"], envelope)  # type: ignore[index]
    for op, combine in (("and", all), ("or", any)):
        if has_property(expr, op):
            members = expr[op]  # type: ignore[index]
            if not isinstance(members, (list, tuple)):
                raise PredicateEvalError(f"`{op}` clause must be an array of predicates")
            return _short_circuit(combine, members, envelope)
    raise PredicateEvalError(f"unknown predicate operator: {_describe(expr)}")


def _short_circuit(
    combine: Callable[[Any], bool], members: list[Any] | tuple[Any, ...], envelope: object
) -> bool:
    return combine(_evaluate(m, envelope) for m in members)


def _describe(expr: object) -> str:
    try:
        text = wire_json(expr)
    except TypeError:
        text = None
    return text if text is not None else js_to_string(expr)


def evaluate_predicate(expr: Any, envelope: Any) -> bool:
    """Evaluate a ``where`` predicate against an event envelope.

    Data never makes evaluation fail: a missing path is "no value" (``eq`` is false, ``neq``
    true, ``exists`` false). Comparisons follow JavaScript: types must match (``True`` is not
    ``1``), numbers compare as doubles, strings by UTF-16 code units, objects never equal.

    Args:
        expr: The predicate, e.g. ``{"eq": [{"path": "data.kind"}, {"lit": "all"}]}``.
        envelope: ``{"name", "data"?, "metadata"?, "emittedAt"}``.

    Returns:
        Whether the envelope satisfies the predicate.

    Raises:
        PredicateEvalError: The predicate is malformed (unknown operator, ``and``/``or`` not a
            list, a null or primitive where a predicate or side must be, a short tuple...).
    """
    try:
        return _evaluate(expr, envelope)
    except RecursionError:
        raise PredicateEvalError("predicate is nested too deeply") from None


# ---- static validation ---------------------------------------------------------------------


def _label(path: list[str]) -> str:
    return ".".join(path) if path else "(root)"


def _lit_type(side: object) -> str:
    if not isinstance(side, dict) or "lit" not in side:
        return "unknown"
    lit = side["lit"]
    if lit is None:
        return "null"
    kind = js_typeof(lit)
    return kind if kind in ("number", "string", "boolean") else "unknown"


def _validate_side(side: object, errors: list[str], path: list[str]) -> None:
    where = _label(path)
    if not is_js_object(side):
        errors.append(f"{where}: expected {{ path }} or {{ lit }}, got {js_typeof(side)}")
        return
    if has_property(side, "path"):
        text = side["path"]  # type: ignore[index]
        if not isinstance(text, str) or not text:
            errors.append(f'{where}: "path" must be a non-empty string')
            return
        segments = parse_path(text)
        root = js_to_string(segments[0]) if segments else "undefined"
        if root not in ROOTS:
            errors.append(f'{where}: path root "{root}" is not one of {_ROOTS_TEXT}')
        return
    if has_property(side, "lit"):
        lit = side["lit"]  # type: ignore[index]
        if lit is not None and js_typeof(lit) not in ("string", "number", "boolean"):
            errors.append(f"{where}: lit must be string | number | boolean | null")
        return
    errors.append(f'{where}: must specify "path" or "lit"')


def _walk(expr: object, errors: list[str], path: list[str]) -> None:
    if not is_js_object(expr):
        errors.append(f"{_label(path)}: predicate must be an object, got {js_typeof(expr)}")
        return
    keys = own_keys(expr)  # type: ignore[arg-type]
    if len(keys) != 1:
        errors.append(
            f"{_label(path)}: a predicate object must have exactly one operator key, "
            f"got {len(keys)} ({', '.join(keys)})"
        )
        return
    op = keys[0]
    if op not in OPERATORS or not isinstance(expr, dict):
        errors.append(f'{_label(path)}: unknown predicate operator "{op}"')
        return
    raw = expr[op]
    here = [*path, op]
    if op in ("eq", "neq", *_ORDERED):
        if not isinstance(raw, (list, tuple)) or len(raw) != 2:
            errors.append(f"{_label(here)}: expected [lhs, rhs] tuple")
            return
        _validate_side(raw[0], errors, [*here, "0"])
        _validate_side(raw[1], errors, [*here, "1"])
        if op in _ORDERED:
            lhs, rhs = _lit_type(raw[0]), _lit_type(raw[1])
            if "unknown" not in (lhs, rhs) and lhs != rhs and lhs in ("number", "string"):
                errors.append(
                    f"{_label(here)}: ordered comparison sides must agree on type "
                    f"(got {lhs} vs {rhs})"
                )
    elif op == "in":
        if not isinstance(raw, (list, tuple)) or len(raw) != 2:
            errors.append(f"{_label(here)}: expected [lhs, rhs[]] tuple")
            return
        _validate_side(raw[0], errors, [*here, "0"])
        if not isinstance(raw[1], (list, tuple)):
            errors.append(f"{_label([*here, '1'])}: rhs must be an array of paths/literals")
            return
        for i, candidate in enumerate(raw[1]):
            _validate_side(candidate, errors, [*here, "1", str(i)])
    elif op == "exists":
        _validate_side(raw, errors, here)
    elif op == "not":
        _walk(raw, errors, here)
    else:
        if not isinstance(raw, (list, tuple)):
            errors.append(f"{_label(here)}: {op} must be an array of predicates")
            return
        for i, member in enumerate(raw):
            _walk(member, errors, [*here, str(i)])


def validate_predicate(expr: Any) -> ValidationResult:
    """Check a predicate's structure statically (what ``trigger_on`` runs at registration).

    Never raises. Each message is prefixed with its location (``(root)``, ``and.2.or.0.gt``,
    ``in.1.2``...) and the messages are the reference's, in depth-first order.

    Args:
        expr: The predicate to check (``MISSING`` is reported as ``got undefined``).

    Returns:
        ``ValidationResult(ok, errors)``.
    """
    errors: list[str] = []
    try:
        _walk(expr, errors, [])
    except RecursionError:
        errors.append("(root): predicate is nested too deeply")
    return ValidationResult(ok=not errors, errors=errors)
