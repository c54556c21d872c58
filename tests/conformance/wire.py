"""Loading the wire fixtures and comparing wire documents under the conformance rules.

Rules (also in this folder's README): every field a fixture writes is compared exactly,
except the normalised ones: times (``startedAt``, ``finishedAt``, ``at``, ``resolvedAt``,
``createdAt``, ``registeredAt``) only have to be integers, and in requests the ``runId`` (any
non-empty string) and ``deadline`` (any integer). A ``null`` in a fixture also matches an
absent field. Fields a fixture does not write (relayflow's extensions) may be present.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

FIXTURES = Path(__file__).parent / "fixtures"
TIME_KEYS = frozenset({"startedAt", "finishedAt", "at", "resolvedAt", "createdAt", "registeredAt"})
REQUEST_ID_KEYS = frozenset({"runId", "deadline"})


def load_fixtures() -> list[dict[str, Any]]:
    """Every fixture, by file name."""
    return [json.loads(p.read_text("utf-8")) for p in sorted(FIXTURES.glob("*.json"))]


def mismatches(expected: Any, actual: Any, *, request: bool = False) -> list[str]:
    """Where ``actual`` differs from ``expected`` under the rules (empty: it conforms)."""
    return list(_walk(expected, actual, "$", request))


def _walk(expected: Any, actual: Any, path: str, request: bool) -> Iterator[str]:
    if isinstance(expected, dict):
        if not isinstance(actual, dict):
            yield f"{path}: expected an object, got {actual!r}"
            return
        for key, want in expected.items():
            here = f"{path}.{key}"
            if want is None:
                if actual.get(key) is not None:
                    yield f"{here}: expected null or absent, got {actual[key]!r}"
            elif key not in actual:
                yield f"{here}: missing"
            elif key in TIME_KEYS or (request and key == "deadline"):
                if not isinstance(actual[key], int) or isinstance(actual[key], bool):
                    yield f"{here}: expected an integer, got {actual[key]!r}"
            elif request and key == "runId" and path == "$":
                if not isinstance(actual[key], str) or not actual[key]:
                    yield f"{here}: expected a run id, got {actual[key]!r}"
            else:
                yield from _walk(want, actual[key], here, request)
    elif isinstance(expected, list):
        if not isinstance(actual, list) or len(actual) != len(expected):
            yield f"{path}: expected {len(expected)} items, got {actual!r}"
            return
        for i, (want, got) in enumerate(zip(expected, actual, strict=True)):
            yield from _walk(want, got, f"{path}[{i}]", request)
    elif type(expected) is not type(actual) or expected != actual:
        yield f"{path}: expected {expected!r}, got {actual!r}"
