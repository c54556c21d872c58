"""The pure retention helpers every manifest store shares."""

from __future__ import annotations

import pytest

from relayflow.errors import ValidationError
from relayflow.events import ManifestVersion, plan_retention, record_registration


def history(*pairs: tuple[str, int]) -> list[ManifestVersion]:
    return [ManifestVersion(v, t) for v, t in pairs]


PLANS = [
    ("empty", [], None, 3, (), ()),
    ("under-keep", [("a", 1), ("b", 2)], "b", 3, ("b", "a"), ()),
    (
        "newest-three",
        [("a", 1), ("b", 2), ("c", 3), ("d", 4), ("e", 5)],
        "e",
        3,
        ("e", "d", "c"),
        ("b", "a"),
    ),
    ("current-is-old", [("a", 1), ("b", 2), ("c", 3), ("d", 4)], "a", 3, ("a", "d", "c"), ("b",)),
    ("keep-one", [("a", 1), ("b", 2)], "a", 1, ("a",), ("b",)),
    ("ties-by-position", [("a", 5), ("b", 5), ("c", 5)], "c", 2, ("c", "b"), ("a",)),
    ("no-current", [("a", 1), ("b", 2)], None, 1, ("b",), ("a",)),
]


@pytest.mark.parametrize(
    ("entries", "current", "keep", "kept", "pruned"),
    [pytest.param(history(*h), c, k, kp, pr, id=i) for i, h, c, k, kp, pr in PLANS],
)
def test_plan_retention(
    entries: list[ManifestVersion],
    current: str | None,
    keep: int,
    kept: tuple[str, ...],
    pruned: tuple[str, ...],
) -> None:
    plan = plan_retention(entries, current, keep)
    assert (plan.kept, plan.pruned) == (kept, pruned)


def test_plan_retention_refuses_keep_below_one() -> None:
    with pytest.raises(ValidationError):
        plan_retention([], None, 0)


def test_record_registration_appends_a_new_version() -> None:
    assert record_registration(history(("a", 1)), "b", 2) == history(("a", 1), ("b", 2))


def test_re_registration_moves_the_version_to_newest_with_a_fresh_time() -> None:
    after = record_registration(history(("a", 1), ("b", 2), ("c", 3)), "a", 10)
    assert after == history(("b", 2), ("c", 3), ("a", 10))
    assert plan_retention(after, "a", 2).kept == ("a", "c")


def test_registration_time_never_goes_back() -> None:
    after = record_registration(history(("a", 50), ("b", 60)), "a", 40)
    assert after == history(("b", 60), ("a", 60))
    assert plan_retention(after, None, 1).kept == ("a",)
