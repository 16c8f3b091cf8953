"""Statistics for recall cells: Wilson intervals, the pass/fail/undecided rule, early stopping,
effective context length, and the one-sided Fisher exact test used to compare base and head.

Stdlib only. Every function is pure, so the engine, the report and the compare stage agree.

The cell rule (documented in docs/recall.md)
--------------------------------------------
A cell (size x depth) plans ``planned`` trials and has a ``threshold`` (minimum recall rate).
Judged on the *planned* trials, with ``quota = ceil(threshold * planned)``:

* **pass**      — hits >= quota (the cell met the bar on its planned trials);
* **fail**      — below the quota *and* the Wilson 95% upper bound of hits/planned is below the
  threshold, i.e. the rate is demonstrably below the bar, not just unlucky;
* **undecided** — below the quota but the interval still reaches the threshold (too few trials to
  tell); also any cell whose remaining trials could still change its status (a capped or
  interrupted run).

The status only grows with hits (fail < undecided < pass), so once the worst case (every remaining
trial misses) and the best case (every remaining trial hits) give the same status, no remaining
trial can change it: that is when a cell stops early. The verdict is therefore identical to the one
running every planned trial would give. For a binary pass/fail rule this is the classical
curtailment (``hits >= quota`` -> pass, ``misses > planned - quota`` -> fail); the three-way rule
stops a failing cell a little later, when its failure is also statistically clear.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Mapping, Sequence
from statistics import NormalDist
from typing import Literal

CellStatus = Literal["pass", "fail", "undecided"]

Z95 = 1.959963984540054  # two-sided 95% normal quantile
_EPS = 1e-9  # threshold * planned is computed in floating point: 0.8 * 5 must give quota 4, not 5


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


def quota(threshold: float, planned: int) -> int:
    """Hits needed out of ``planned`` trials to reach ``threshold``."""
    return max(0, math.ceil(threshold * planned - _EPS))


@functools.lru_cache(maxsize=65536)  # pure and hot: the scheduler asks it for every pick
def final_status(hits: int, planned: int, threshold: float) -> CellStatus:
    """Status of a cell that ran all its ``planned`` trials."""
    if hits >= quota(threshold, planned):
        return "pass"
    if wilson_interval(hits, planned)[1] < threshold:
        return "fail"
    return "undecided"


def _bounds(hits: int, trials: int, planned: int, threshold: float) -> tuple[CellStatus, CellStatus]:
    remaining = max(0, planned - trials)
    return final_status(hits, planned, threshold), final_status(hits + remaining, planned, threshold)


def cell_status(hits: int, trials: int, planned: int, threshold: float) -> CellStatus:
    """Status now: the final status when the remaining trials cannot change it, else undecided."""
    worst, best = _bounds(hits, trials, planned, threshold)
    return worst if worst == best else "undecided"


def is_decided(hits: int, trials: int, planned: int, threshold: float) -> bool:
    """True once no outcome of the remaining planned trials can change the cell's status."""
    worst, best = _bounds(hits, trials, planned, threshold)
    return worst == best


def _segments(planned: int, threshold: float) -> list[tuple[int, int]]:
    """Final hit counts grouped by status: inclusive (low, high) ranges, fail then undecided then pass."""
    out: list[tuple[int, int]] = []
    start = 0
    for h in range(1, planned + 2):
        if h > planned or final_status(h, planned, threshold) != final_status(start, planned, threshold):
            out.append((start, h - 1))
            start = h
    return out


def trials_to_decide(hits: int, trials: int, planned: int, threshold: float) -> int:
    """Fewest further outcomes after which the cell could be decided (0 when already decided).

    The scheduler never has more trials of a cell in flight than this, so no call is spent that
    sequential early stopping would have saved. A cell can settle on any status, "undecided"
    included (e.g. hits that can neither reach the quota nor fall clearly below the threshold).
    """
    remaining = max(0, planned - trials)
    if is_decided(hits, trials, planned, threshold):
        return 0
    segments = _segments(planned, threshold)
    for k in range(1, remaining + 1):
        left = remaining - k  # trials still open after k more outcomes
        # decided after k outcomes with x hits in total iff x and x + left share a status segment
        for low, high in segments:
            if max(low, hits) <= min(hits + k, high - left):
                return k
    return remaining


# -- effective context length ---------------------------------------------------------------


def effective_context(sizes: Sequence[int], status_by_size: Mapping[int, Iterable[str]]) -> int | None:
    """RULER-style effective length: the largest size such that it and every smaller size pass at
    every depth. ``None`` when even the smallest size does not."""
    best = None
    for size in sorted(sizes):
        statuses = list(status_by_size.get(size, ()))
        if not statuses or any(s != "pass" for s in statuses):
            break
        best = size
    return best


def effective_context_relative(
    sizes: Sequence[int], worst_rate_by_size: Mapping[int, float | None], threshold: float
) -> int | None:
    """Largest size (contiguous from the smallest) whose worst-depth rate stays at or above
    ``threshold`` times the smallest size's worst-depth rate: how far the model keeps its own
    short-context performance, meaningful even for a model that misses the absolute bar."""
    ordered = sorted(sizes)
    if not ordered:
        return None
    ref = worst_rate_by_size.get(ordered[0])
    if ref is None or ref <= 0:
        return None
    best = None
    for size in ordered:
        rate = worst_rate_by_size.get(size)
        if rate is None or rate + _EPS < threshold * ref:
            break
        best = size
    return best


# -- base vs head ---------------------------------------------------------------------------


def fisher_drop_pvalue(base_hits: int, base_n: int, head_hits: int, head_n: int) -> float:
    """One-sided Fisher exact test of "head recall is lower than base".

    Under the null (same rate), given the total hits, the head's hits follow a hypergeometric
    distribution; the p-value is P(head hits <= observed). Exact integer arithmetic, stdlib only.
    Returns 1.0 when either side has no trial (nothing to conclude).
    """
    for name, hits, n in (("base", base_hits, base_n), ("head", head_hits, head_n)):
        if n < 0 or hits < 0 or hits > n:
            raise ValueError(f"{name}: hits must be between 0 and n ({hits}/{n})")
    if base_n == 0 or head_n == 0:
        return 1.0
    total_n = base_n + head_n
    total_hits = base_hits + head_hits
    lo = max(0, total_hits - base_n)  # fewest hits the head can have given the margins
    numerator = sum(
        math.comb(total_hits, k) * math.comb(total_n - total_hits, head_n - k)
        for k in range(lo, head_hits + 1)
    )
    return min(1.0, numerator / math.comb(total_n, head_n))


# -- groups of cells: exact stratified test, Holm ------------------------------------------------


_LOG_FACTORIALS = [0.0]  # log(k!) for k = 0..; grown on demand (the tests below are hot in the bench)


def _log_factorial(n: int) -> float:
    table = _LOG_FACTORIALS
    while len(table) <= n:
        table.append(table[-1] + math.log(len(table)))
    return table[n]


def _log_comb(n: int, k: int) -> float:
    return _log_factorial(n) - _log_factorial(k) - _log_factorial(n - k)


@functools.lru_cache(maxsize=65536)  # strata repeat (same counts): the bench replays thousands of PRs
def _head_hits_pmf(total_n: int, total_hits: int, head_n: int) -> tuple[int, tuple[float, ...]]:
    """Null distribution of one stratum's head hits given its margins (hypergeometric):
    (lowest possible value, probabilities from there up)."""
    lo = max(0, total_hits - (total_n - head_n))
    hi = min(total_hits, head_n)
    log_denominator = _log_comb(total_n, head_n)
    pmf = tuple(
        math.exp(_log_comb(total_hits, k) + _log_comb(total_n - total_hits, head_n - k) - log_denominator)
        for k in range(lo, hi + 1)
    )
    return lo, pmf


Stratum = tuple[int, int, int, int]  # (base hits, base trials, head hits, head trials)


def stratified_drop_pvalue(strata: Sequence[Stratum]) -> float:
    """One-sided exact stratified test (exact Cochran-Mantel-Haenszel) of "head recall is lower
    than base" over several strata (cells) that may each have their own rate.

    Conditional on each stratum's margins, its head hits are hypergeometric under the null (same
    rate on both sides *within* the stratum); the statistic is the total head hits, whose exact
    null distribution is the convolution of the strata's. The p-value is P(total <= observed).
    Strata with no trial on a side carry no information and are skipped; 1.0 when none is left.
    With a single stratum this is the one-sided Fisher exact test.
    """
    dists: list[tuple[float, ...]] = []
    slack = 0  # observed total minus the smallest possible total
    for base_hits, base_n, head_hits, head_n in strata:
        for hits, n in ((base_hits, base_n), (head_hits, head_n)):
            if n < 0 or not 0 <= hits <= n:
                raise ValueError(f"hits must be between 0 and n ({hits}/{n})")
        if base_n == 0 or head_n == 0:
            continue
        lo, pmf = _head_hits_pmf(base_n + head_n, base_hits + head_hits, head_n)
        dists.append(pmf)
        slack += head_hits - lo
    if not dists:
        return 1.0
    # convolve, keeping only partial sums that can still end at or below the observed total
    acc = [1.0]
    for pmf in dists:
        width = min(len(acc) + len(pmf) - 1, slack + 1)
        nxt = [0.0] * width
        for i, a in enumerate(acc):
            if a == 0.0:
                continue
            for j in range(min(len(pmf), width - i)):
                nxt[i + j] += a * pmf[j]
        acc = nxt
    return min(1.0, sum(acc))


def holm_rejections(pvalues: Sequence[float], alpha: float) -> list[bool]:
    """Holm's step-down procedure: which hypotheses are rejected with family-wise error <= ALPHA.

    The k-th smallest p-value is compared with alpha / (m - k + 1); testing stops at the first
    that is not below its bound. Valid for any dependence between the tests, and monotone: raising
    a p-value never adds a rejection (so a hypothesis left untested may be given p = 1).
    """
    m = len(pvalues)
    order = sorted(range(m), key=lambda i: pvalues[i])
    rejected = [False] * m
    for rank, i in enumerate(order):
        if pvalues[i] > alpha / (m - rank):
            break
        rejected[i] = True
    return rejected


def family_z(family_size: int, confidence: float = 0.95) -> float:
    """Normal quantile for two-sided intervals that hold jointly over FAMILY_SIZE groups
    (Bonferroni): each interval at 1 - (1 - confidence) / family_size."""

    per_interval = (1.0 - confidence) / max(1, family_size)
    return NormalDist().inv_cdf(1.0 - per_interval / 2.0)


@functools.lru_cache(maxsize=16384)
def paired_drop_pvalue(worse: int, better: int) -> float:
    """One-sided exact stratified McNemar test of "head recall is lower than base" on paired trials
    (the same needle and filler asked of both sides): WORSE pairs the base got right and the head
    wrong, BETTER the reverse, summed over the strata (cells).

    Under the null each discordant pair is worse or better with probability 1/2 whatever its
    stratum's rates (conditioning on the discordant pairs removes the cell and seed effects), so
    the stratified statistic's exact null is Binomial(worse + better, 1/2): p = P(X >= worse).
    """
    if worse < 0 or better < 0:
        raise ValueError(f"pair counts must be >= 0 ({worse}, {better})")
    n = worse + better
    if n == 0 or worse == 0:
        return 1.0
    log_half = n * math.log(0.5)
    tail = sum(math.exp(_log_comb(n, k) + log_half) for k in range(worse, n + 1))
    return min(1.0, tail)
