"""Percentiles read from the rollup's log-spaced histograms agree with the exact ones within
a bucket's width, and histograms of separate hours add up to the histogram of all runs."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from relayflow.stats.histogram import DURATION_BUCKETS, add_counts

#: A bucket spans a factor 10^0.1; its geometric middle is within 10^0.05 of any value in it.
WIDTH = 10**0.05


def _exact(values: list[float], fraction: float) -> float:
    """The nearest-rank percentile."""
    ordered = sorted(values)
    return ordered[max(1, math.ceil(fraction * len(ordered))) - 1]


def _histogram(values: list[float]) -> dict[int, int]:
    counts: dict[int, int] = {}
    for value in values:
        index = DURATION_BUCKETS.index(value)
        counts[index] = counts.get(index, 0) + 1
    return counts


def test_known_durations_give_their_percentiles_within_a_bucket() -> None:
    durations = [120.0] * 50 + [900.0] * 45 + [30_000.0] * 5
    counts = _histogram(durations)
    p50 = DURATION_BUCKETS.percentile(counts, 0.5)
    p95 = DURATION_BUCKETS.percentile(counts, 0.95)
    p99 = DURATION_BUCKETS.percentile(counts, 0.99)
    assert p50 is not None and 120 / WIDTH <= p50 <= 120 * WIDTH
    assert p95 is not None and 900 / WIDTH <= p95 <= 900 * WIDTH
    assert p99 is not None and 30_000 / WIDTH <= p99 <= 30_000 * WIDTH
    assert DURATION_BUCKETS.percentile({}, 0.5) is None


def test_values_outside_the_buckets_fall_in_the_first_or_last() -> None:
    assert DURATION_BUCKETS.index(0) == 0
    assert DURATION_BUCKETS.index(0.2) == 0
    assert DURATION_BUCKETS.index(1e15) == DURATION_BUCKETS.count - 1
    assert DURATION_BUCKETS.index(10.0) == 10, "a decade's bound starts its bucket"


@given(
    st.lists(st.floats(min_value=1, max_value=1e9), min_size=1, max_size=200),
    st.sampled_from([0.5, 0.9, 0.95, 0.99]),
)
def test_a_percentile_is_within_a_buckets_width_of_the_exact_one(
    values: list[float], fraction: float
) -> None:
    estimate = DURATION_BUCKETS.percentile(_histogram(values), fraction)
    exact = _exact(values, fraction)
    assert estimate is not None
    assert exact / WIDTH * (1 - 1e-9) <= estimate <= exact * WIDTH * (1 + 1e-9)


@given(st.lists(st.floats(min_value=1, max_value=1e9), min_size=2, max_size=100))
def test_hours_add_up_to_the_histogram_of_all_their_runs(values: list[float]) -> None:
    half = len(values) // 2
    merged = _histogram(values[:half])
    add_counts(merged, _histogram(values[half:]))
    assert merged == _histogram(values)
