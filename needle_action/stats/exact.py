"""Exact tests for base against head: the one-sided Fisher test of a drop, its stratified form
over a group's cells, Holm's step-down over a family of groups, and the exact sign test of paired
trials. Stdlib only; every function is pure, so the engine, the report and the compare stage agree.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence

# -- effective context length ---------------------------------------------------------------


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
