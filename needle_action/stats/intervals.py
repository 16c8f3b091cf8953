"""Intervals for a rate of hits: Wilson's score interval, and the z of a family-wise confidence."""

from __future__ import annotations

import math
from statistics import NormalDist

Z95 = 1.959963984540054  # two-sided 95% normal quantile


def wilson_interval(hits: int, n: int, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval for a binomial rate; (0, 1) when there is no trial yet."""
    if n <= 0:
        return 0.0, 1.0
    if hits < 0 or hits > n:
        raise ValueError(f"hits must be between 0 and n ({hits}/{n})")
    p = hits / n
    z2 = z * z
    denom = 1.0 + z2 / n
    centre = (p + z2 / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / denom
    low = 0.0 if hits == 0 else max(0.0, centre - half)
    high = 1.0 if hits == n else min(1.0, centre + half)
    return low, high


def family_z(family_size: int, confidence: float = 0.95) -> float:
    """Normal quantile for two-sided intervals that hold jointly over FAMILY_SIZE groups
    (Bonferroni): each interval at 1 - (1 - confidence) / family_size."""

    per_interval = (1.0 - confidence) / max(1, family_size)
    return NormalDist().inv_cdf(1.0 - per_interval / 2.0)
