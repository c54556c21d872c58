"""Fixed log-spaced buckets: a histogram that a counter per bucket can hold, and the
percentiles read back from it.

Ten buckets per decade: a bucket's upper bound is 10^0.1 (about 1.26) times its lower bound,
so a percentile read as the bucket's geometric midpoint is within 12.2 % of the true value.
The buckets never change, so histograms of different hours add up bucket by bucket.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TypeVar

PER_DECADE = 10
K = TypeVar("K")


@dataclass(frozen=True)
class LogBuckets:
    """``count`` buckets of ten per decade, the first starting at ``lowest``.

    Values below ``lowest`` (zero included) fall in the first bucket, values past the last
    bucket in the last one.
    """

    lowest: float
    count: int

    def index(self, value: float) -> int:
        """The bucket ``value`` falls in."""
        if value <= self.lowest:
            return 0
        position = math.floor(math.log10(value / self.lowest) * PER_DECADE + 1e-9)
        return min(position, self.count - 1)

    def lower_bound(self, index: int) -> float:
        """The smallest value of bucket ``index``."""
        return float(self.lowest * 10 ** (index / PER_DECADE))

    def midpoint(self, index: int) -> float:
        """The geometric middle of bucket ``index``: what a percentile in it reads as."""
        return float(self.lowest * 10 ** ((index + 0.5) / PER_DECADE))

    def percentile(self, counts: Mapping[int, int], fraction: float) -> float | None:
        """The ``fraction`` (0 < fraction <= 1) percentile of the values counted in ``counts``
        (bucket index -> values in it), by nearest rank; None when nothing was counted."""
        total = sum(counts.values())
        if total <= 0:
            return None
        rank = max(1, math.ceil(fraction * total))
        seen = 0
        for index in sorted(counts):
            seen += counts[index]
            if seen >= rank:
                return self.midpoint(index)
        return self.midpoint(max(counts))


#: Run durations in milliseconds: 1 ms up to 10^10 ms (115 days).
DURATION_BUCKETS = LogBuckets(lowest=1.0, count=100)
#: Cost of a run in dollars: a nanodollar up to $10.
COST_BUCKETS = LogBuckets(lowest=1e-9, count=100)


def add_counts(into: dict[K, int], counts: Mapping[K, int]) -> None:
    """Add ``counts`` to ``into``, bucket by bucket."""
    for index, value in counts.items():
        into[index] = into.get(index, 0) + value
