"""Whether an injection satisfies a wait's ``match``: a predicate of the reference DSL or a
partial dict matched as a deep subset of the payload."""

from __future__ import annotations

from typing import Any

PREDICATE_OPERATORS = frozenset(
    {"eq", "neq", "in", "gt", "gte", "lt", "lte", "exists", "not", "and", "or"}
)


def is_predicate(match: Any) -> bool:
    """True when ``match`` is a predicate expression (one key, a DSL operator)."""
    return isinstance(match, dict) and len(match) == 1 and next(iter(match)) in PREDICATE_OPERATORS


def is_deep_subset(expected: Any, actual: Any) -> bool:
    """True when every key of ``expected`` is in ``actual`` with a matching value, recursively.

    Lists and scalars must be equal; ``True`` never equals ``1``.
    """
    if isinstance(expected, dict):
        if not isinstance(actual, dict):
            return False
        return all(k in actual and is_deep_subset(v, actual[k]) for k, v in expected.items())
    if isinstance(expected, bool) or isinstance(actual, bool):
        return type(expected) is type(actual) and expected == actual
    return bool(expected == actual)


def matches(match: Any, envelope: dict[str, Any]) -> bool:
    """Evaluate a wait's ``match`` against an injection envelope.

    Args:
        match: None (anything matches), a predicate expression, or a partial payload dict.
        envelope: ``{name, data, metadata, emittedAt}`` of the injection.

    Returns:
        Whether the injection satisfies the wait. A predicate that fails to evaluate does
        not match.
    """
    if match is None:
        return True
    if is_predicate(match):
        # Imported here: the predicate DSL lives with event routing.
        from relayflow.events import evaluate_predicate

        try:
            return bool(evaluate_predicate(match, envelope))
        except Exception:
            return False
    return is_deep_subset(match, envelope.get("data"))
