"""Runs have levels: the tests for a base and a head measured in different runs (issue 31).

The model answers a whole run a little better or worse than another (serving changes, load, silent
updates): run r has a level ``u_r ~ N(0, tau^2)`` on the logit scale, shared by every cell of the
run. A base and a head measured in one job share theirs, and today's tests hold (sequential.py).
A base from another run (main's stored results, ``--baseline FILE``, the data branch) does not:

* **tau** is estimated from stored unchanged runs (:func:`estimate_spread`): each run's common
  logit shift against the pooled cell rates (:func:`run_shift`, its maximum-likelihood estimate),
  their spread by the method of moments minus each shift's own sampling variance, shrunk toward a
  stated prior (``PRIOR_TAU`` with the weight of ``PRIOR_WEIGHT`` runs). With fewer than
  ``MIN_RUNS`` runs there is no estimate: the prior is used and the output says so.
* a group's drop is tested **relative to the other cells** (:func:`contrast_pvalue`): conditional
  on each cell's total hits, the head's hits follow Fisher's noncentral hypergeometric law with
  one odds ratio for the whole grid (the run shift, a nuisance fitted by conditional maximum
  likelihood); the score test of "the group's odds ratio is lower than the rest's" does not see the
  run shift at all. Lost-in-the-middle, a size that breaks, a depth that breaks: all relative.
* a drop of the **whole grid** is indistinguishable from a run shift but for its size:
  :func:`uniform_pvalue` tests the fitted shift against its sampling variance plus ``2 tau^2``. Without
  an estimate the yardstick is not the planning prior but ``UNMEASURED_TAU`` (0.6, the widest spread
  the benchmark models): against the prior 0.3 a true spread of 0.6 blocked 4-6% of unchanged
  prompts (docs/benchmarks.md), and a broad regression (a model that starts inventing answers
  everywhere) still stands out of 0.6.

Pure functions of counts; stdlib only.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import Literal

from needle_action.stats.exact import _head_hits_pmf

CellKey = tuple[int, float]
Counts = Mapping[CellKey, tuple[int, int]]

PRIOR_TAU = 0.3  # the run-to-run sd (logit scale) assumed with no estimate: moderate, never zero
PRIOR_WEIGHT = 1.0  # the prior counts as this many runs' worth of evidence
MIN_RUNS = 3  # fewer stored runs give no estimate: the prior alone
UNMEASURED_TAU = 0.6  # with no estimate, the whole grid is judged against this spread (never zero)
_SHIFT_LIMIT = 8.0  # a fitted shift is clamped here (every hit or every miss on one side)
_NORMAL = NormalDist()
# three-point Gauss-Hermite rule for N(0, 1): (node, weight)
_GAUSS_HERMITE = ((0.0, 2 / 3), (math.sqrt(3.0), 1 / 6), (-math.sqrt(3.0), 1 / 6))


@dataclass(frozen=True)
class RunSpread:
    """How far runs' levels wander (logit scale) and what that figure rests on."""

    tau: float
    runs: int  # stored runs it was estimated from (0: none)
    method: Literal[
        "moments", "prior"
    ]  # "moments" (estimated, shrunk toward the prior) or "prior" (too few runs)
    raw_tau: float | None = None  # the moments estimate before shrinking (None: none)

    @property
    def variance(self) -> float:
        return self.tau * self.tau

    @property
    def tested_variance(self) -> float:
        """The spread the whole grid is judged against: the estimate, else ``UNMEASURED_TAU``'s."""
        return self.variance if self.method == "moments" else max(self.tau, UNMEASURED_TAU) ** 2

    @property
    def dof(self) -> float:
        """Degrees of freedom of the estimate (the prior alone: taken as known, infinite)."""
        return math.inf if self.method == "prior" else self.runs - 1 + PRIOR_WEIGHT

    @classmethod
    def prior(cls, runs: int = 0) -> RunSpread:
        return cls(tau=PRIOR_TAU, runs=runs, method="prior")

    def describe(self) -> str:
        """One line for the output: the figure and what it rests on."""
        if self.method == "prior":
            return (
                f"no estimate of the run-to-run sd: {self.runs} stored run(s), at least {MIN_RUNS} are "
                f"needed (plans assume the prior {self.tau:.2f} on the logit scale; the whole grid is "
                f"judged against {max(self.tau, UNMEASURED_TAU):.2f}, the widest spread expected)"
            )
        raw = (
            f", {self.raw_tau:.2f} before shrinking toward the prior {PRIOR_TAU}"
            if self.raw_tau is not None
            else ""
        )
        return f"run-to-run sd {self.tau:.2f} (logit) estimated from {self.runs} stored runs{raw}"


def whole_grid_tested(spread: RunSpread | None) -> bool:
    """Is the whole grid tested against the run-to-run spread? Across runs (SPREAD given): a drop of
    every cell at once is told from another run's level by its size (:func:`uniform_pvalue`)."""
    return spread is not None


def _tilted(total_n: int, total_hits: int, head_n: int, shift: float) -> tuple[float, float]:
    """(mean, variance) of a cell's head hits given its margins when the head's odds are exp(SHIFT)
    times the base's (Fisher's noncentral hypergeometric)."""
    lo, pmf = _head_hits_pmf(total_n, total_hits, head_n)
    if len(pmf) == 1:
        return float(lo), 0.0
    logs = [math.log(p) + shift * k if p > 0 else -math.inf for k, p in enumerate(pmf)]
    top = max(logs)
    weights = [math.exp(x - top) for x in logs]
    norm = sum(weights)
    mean = sum(k * w for k, w in enumerate(weights)) / norm
    var = sum((k - mean) ** 2 * w for k, w in enumerate(weights)) / norm
    return lo + mean, var


Stratum = tuple[int, int, int, int]  # (base hits, base trials, head hits, head trials)


def _strata(base: Counts, head: Counts, cells: Sequence[CellKey]) -> list[tuple[CellKey, Stratum]]:
    """The cells with trials on both sides and some information (not every trial a hit, not none)."""
    out = []
    for k in cells:
        if k not in base or k not in head:
            continue
        (bh, bn), (hh, hn) = base[k], head[k]
        if bn > 0 and hn > 0 and 0 < bh + hh < bn + hn:
            out.append((k, (bh, bn, hh, hn)))
    return out


def common_shift(strata: Sequence[Stratum]) -> tuple[float, float]:
    """(the head's common log odds ratio over STRATA, its conditional information at that value):
    the conditional maximum-likelihood fit of one shift for every cell (Newton, bisection-safe)."""
    observed = sum(s[2] for s in strata)
    low, high, shift = -_SHIFT_LIMIT, _SHIFT_LIMIT, 0.0
    info = 0.0
    for _ in range(60):
        moments = [_tilted(bn + hn, bh + hh, hn, shift) for bh, bn, hh, hn in strata]
        expected = sum(m for m, _ in moments)
        info = sum(v for _, v in moments)
        gap = observed - expected
        if abs(gap) < 1e-9:
            break
        if gap > 0:
            low = shift
        else:
            high = shift
        step = shift + gap / info if info > 0 else (low + high) / 2
        shift = step if low < step < high else (low + high) / 2
        if high - low < 1e-9:
            break
    return shift, info


def contrast_pvalue(
    base: Counts, head: Counts, cells: Sequence[CellKey], history: Sequence[Counts] = ()
) -> float:
    """One-sided p-value of "the head's recall in CELLS dropped relative to the grid's other cells"
    (BASE and HEAD: every cell of the grid). The run shift between the two runs is fitted and
    cancels; the score test of the group's own log odds ratio, normal reference. 1.0 when the group
    or the rest carries no information. HISTORY: earlier runs of the base's fingerprint, each with
    its own level: they join the base side run by run (:class:`RunsFit`), never summed."""
    if history:
        return _fit(_frozen(head), _frozen(base), tuple(_frozen(h) for h in history)).contrast_pvalue(cells)
    inside = set(cells)
    strata = tuple(_strata(base, head, sorted(set(base) | set(head))))
    if all(k in inside for k, _ in strata) or not any(k in inside for k, _ in strata):
        return 1.0
    score = v_group = v_rest = 0.0
    for (k, (_, _, hh, _)), (mean, var) in zip(strata, _fitted(strata), strict=True):
        if k in inside:
            score += hh - mean
            v_group += var
        else:
            v_rest += var
    variance = v_group * v_rest / (v_group + v_rest) if v_group + v_rest > 0 else 0.0
    if variance <= 0:
        return 1.0
    return _NORMAL.cdf(score / math.sqrt(variance))


@functools.lru_cache(maxsize=1024)  # every group of a look is tested at the same fit
def _fitted(strata: tuple[tuple[CellKey, Stratum], ...]) -> tuple[tuple[float, float], ...]:
    """Each stratum's (mean, variance) of the head's hits at the common shift fitted over STRATA."""
    shift, _ = common_shift([s for _, s in strata])
    return tuple(_tilted(bn + hn, bh + hh, hn, shift) for _, (bh, bn, hh, hn) in strata)


def uniform_pvalue(base: Counts, head: Counts, spread: RunSpread) -> float:
    """One-sided p-value of "the head's whole grid dropped" beyond what two runs' levels explain:
    the fitted common shift against its sampling variance plus 2 tau^2."""
    strata = [s for _, s in _strata(base, head, sorted(set(base) | set(head)))]
    if not strata:
        return 1.0
    shift, info = common_shift(strata)
    if info <= 0:
        return 1.0
    return student_cdf(shift / math.sqrt(1.0 / info + 2.0 * spread.tested_variance), spread.dof)


def _beta_fraction(a: float, b: float, x: float) -> float:
    """The continued fraction of the regularized incomplete beta function (modified Lentz)."""
    tiny, c, d = 1e-300, 1.0, 1.0 - (a + b) * x / (a + 1)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    out = d
    for m in range(1, 300):
        for num in (
            m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
            -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1)),
        ):
            d = 1.0 + num * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + num / c
            c = c if abs(c) > tiny else tiny
            out *= c * d
        if abs(c * d - 1.0) < 1e-12:
            break
    return out


def _incomplete_beta(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function I_x(a, b)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    log_front = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    if x < (a + 1) / (a + b + 2):
        return math.exp(log_front) * _beta_fraction(a, b, x) / a
    return 1.0 - math.exp(log_front) * _beta_fraction(b, a, 1.0 - x) / b


def student_cdf(t: float, dof: float) -> float:
    """P(T <= t) for Student's t with DOF degrees of freedom (infinite: the normal)."""
    if math.isinf(dof):
        return _NORMAL.cdf(t)
    tail = 0.5 * _incomplete_beta(dof / 2, 0.5, dof / (dof + t * t))
    return tail if t < 0 else 1.0 - tail


class RunsFit:
    """Several runs of one grid, each with its own level: logit p(run r, cell c) = a_c + u_r, fitted
    by maximum likelihood (the head is run 0, its level the reference). The score test of "the
    head's cells G dropped by delta" uses the efficient information, the cell effects and the run
    levels profiled out (a Schur complement on the run levels: the cells' block is diagonal)."""

    def __init__(self, runs: Sequence[Counts]) -> None:
        keys = sorted(set(runs[0]).intersection(*(set(r) for r in runs[1:2])))
        self.cells = [k for k in keys if 0 < _total(runs, k)[0] < _total(runs, k)[1]]
        self.counts = [[r.get(k, (0, 0)) for k in self.cells] for r in runs]
        self.a = [_logit((h + 0.5) / (n + 1.0)) for h, n in (_total(runs, k) for k in self.cells)]
        self.u = [0.0] * len(runs)
        for _ in range(40):
            if self._newton() < 1e-9:
                break

    def _newton(self) -> float:
        """One Newton step on (cell effects, run levels) jointly; the largest move (capped, so a run
        or a cell with every answer a hit walks out slowly instead of jumping)."""
        w = self._weights()
        runs, width = range(1, len(self.u)), range(len(self.cells))
        d_a = [sum(w[r][c] for r in range(len(self.u))) or 1e-12 for c in width]
        fitted = [
            [n * _expit(a + u) for (_, n), a in zip(row, self.a, strict=True)]
            for row, u in zip(self.counts, self.u, strict=True)
        ]
        g_a = [sum(self.counts[r][c][0] - fitted[r][c] for r in range(len(self.u))) for c in width]
        g_u = [sum(self.counts[r][c][0] - fitted[r][c] for c in width) for r in runs]
        schur = _schur(w, d_a)
        rhs = [g_u[i] - sum(w[r][c] * g_a[c] / d_a[c] for c in width) for i, r in enumerate(runs)]
        step_u = [0.0, *_solve(schur, rhs)]
        step_a = [(g_a[c] - sum(w[r][c] * step_u[r] for r in runs)) / d_a[c] for c in width]
        moved = max([abs(x) for x in step_a + step_u], default=0.0)
        scale = min(1.0, 2.0 / moved) if moved > 0 else 1.0
        limit = 3 * _SHIFT_LIMIT
        self.a = [min(max(a + scale * x, -limit), limit) for a, x in zip(self.a, step_a, strict=True)]
        self.u = [min(max(u + scale * x, -limit), limit) for u, x in zip(self.u, step_u, strict=True)]
        return moved

    def _weights(self) -> list[list[float]]:
        """n p (1 - p) of every (run, cell) at the fit."""
        return [
            [n * _expit(a + u) * (1 - _expit(a + u)) for (_, n), a in zip(row, self.a, strict=True)]
            for row, u in zip(self.counts, self.u, strict=True)
        ]

    @functools.cached_property
    def _information(self) -> tuple[list[list[float]], list[float], list[list[float]]]:
        """(the weights at the fit, the cells' information, the run levels' with the cells profiled
        out): the same for every group a look tests."""
        w = self._weights()
        d_a = [sum(w[r][c] for r in range(len(self.u))) for c in range(len(self.cells))]
        return w, d_a, _schur(w, d_a)

    def contrast_pvalue(self, cells: Sequence[CellKey]) -> float:
        """One-sided p-value of "the head's CELLS dropped relative to its other cells": the efficient
        score over its standard deviation, skewness-corrected (Edgeworth: a count near a rate of 1
        has the longer tail on the low side, where drops are looked for)."""
        inside = set(cells)
        group = [c for c, k in enumerate(self.cells) if k in inside]
        if not group or len(group) == len(self.cells):
            return 1.0
        w, d_a, schur = self._information
        runs, width = range(1, len(self.u)), range(len(self.cells))
        b_a = [w[0][c] if c in group else 0.0 for c in width]
        y = [sum(w[r][c] * b_a[c] / d_a[c] for c in width if d_a[c] > 0) for r in runs]
        beta = [0.0, *(-x for x in _solve(schur, y))]  # the run levels' share of the group's score
        alpha = [
            (b_a[c] - sum(w[r][c] * beta[r] for r in runs)) / d_a[c] if d_a[c] > 0 else 0.0 for c in width
        ]
        score = variance = third = 0.0
        for r in range(len(self.u)):
            for c in width:
                coef = (1.0 if r == 0 and c in group else 0.0) - alpha[c] - beta[r]
                h, n = self.counts[r][c]
                p = _expit(self.a[c] + self.u[r])
                score += coef * (h - n * p)
                variance += coef * coef * w[r][c]
                third += coef**3 * w[r][c] * (1 - 2 * p)
        if variance <= 1e-12:
            return 1.0
        z, skew = score / math.sqrt(variance), third / variance**1.5
        return _NORMAL.cdf(z - skew / 6 * (z * z - 1))


Frozen = tuple[tuple[CellKey, tuple[int, int]], ...]


def _frozen(counts: Counts) -> Frozen:
    return tuple(sorted(counts.items()))


@functools.lru_cache(maxsize=256)  # one fit serves every group of a look (and the pass rule's)
def _fit(head: Frozen, base: Frozen, history: tuple[Frozen, ...]) -> RunsFit:
    return RunsFit([dict(head), dict(base), *(dict(h) for h in history)])


def _schur(w: Sequence[Sequence[float]], d_a: Sequence[float]) -> list[list[float]]:
    """The run levels' information with the cell effects profiled out: D - B' A^-1 B (runs 1..)."""
    inverse = [1.0 / d if d > 0 else 0.0 for d in d_a]
    scaled = [[x * i for x, i in zip(row, inverse, strict=True)] for row in w]
    runs = range(1, len(w))
    return [
        [
            (sum(w[r]) if r == q else 0.0) - sum(a * b for a, b in zip(scaled[r], w[q], strict=True))
            for q in runs
        ]
        for r in runs
    ]


def _total(runs: Sequence[Counts], k: CellKey) -> tuple[int, int]:
    hits = sum(r[k][0] for r in runs if k in r)
    return hits, sum(r[k][1] for r in runs if k in r)


def _solve(matrix: list[list[float]], rhs: list[float]) -> list[float]:
    """MATRIX x = RHS by Gaussian elimination with partial pivoting (small, symmetric systems)."""
    n = len(rhs)
    m = [[*row, b] for row, b in zip(matrix, rhs, strict=True)]
    for i in range(n):
        pivot = max(range(i, n), key=lambda j: abs(m[j][i]))
        m[i], m[pivot] = m[pivot], m[i]
        if abs(m[i][i]) < 1e-12:
            continue
        for j in range(i + 1, n):
            f = m[j][i] / m[i][i]
            for k in range(i, n + 1):
                m[j][k] -= f * m[i][k]
    x = [0.0] * n
    for i in reversed(range(n)):
        if abs(m[i][i]) < 1e-12:
            continue
        x[i] = (m[i][n] - sum(m[i][k] * x[k] for k in range(i + 1, n))) / m[i][i]
    return x


# -- the spread of stored runs -------------------------------------------------------------------


def _logit(p: float) -> float:
    return math.log(p / (1.0 - p))


def _expit(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x))


def run_shift(counts: Counts, reference: Mapping[CellKey, float]) -> tuple[float, float]:
    """(one run's common logit shift from the REFERENCE logits of its cells, the Fisher information
    of that estimate): the maximum-likelihood shift u with sum n expit(ref + u) = sum hits."""
    cells = [(reference[k], h, n) for k, (h, n) in counts.items() if k in reference and n > 0]
    if not cells:
        return 0.0, 0.0
    hits = sum(h for _, h, _ in cells)
    low, high, u = -_SHIFT_LIMIT, _SHIFT_LIMIT, 0.0
    info = 0.0
    for _ in range(60):
        probs = [(_expit(r + u), n) for r, _, n in cells]
        gap = hits - sum(p * n for p, n in probs)
        info = sum(n * p * (1 - p) for p, n in probs)
        if abs(gap) < 1e-9:
            break
        low, high = (u, high) if gap > 0 else (low, u)
        step = u + gap / info if info > 0 else (low + high) / 2
        u = step if low < step < high else (low + high) / 2
        if high - low < 1e-9:
            break
    return u, info


def summed(runs: Sequence[Counts]) -> dict[CellKey, tuple[int, int]]:
    """Each cell's (hits, trials) over RUNS, summed: a reference, never a test's sample."""
    totals: dict[CellKey, tuple[int, int]] = {}
    for run in runs:
        for k, (h, n) in run.items():
            hits, trials = totals.get(k, (0, 0))
            totals[k] = (hits + h, trials + n)
    return totals


def _reference(runs: Sequence[Counts]) -> dict[CellKey, float]:
    """Each cell's pooled logit over RUNS (a half hit and half miss added: no infinite logits)."""
    return {k: _logit((h + 0.5) / (n + 1.0)) for k, (h, n) in summed(runs).items() if n > 0}


def estimate_spread(runs: Sequence[Counts], *, prior_tau: float = PRIOR_TAU) -> RunSpread:
    """tau from RUNS (one mapping cell -> (hits, trials) a stored run, one needle style, all with the
    same fingerprint): the variance of the runs' fitted shifts minus their mean sampling variance
    (method of moments, at least 0), shrunk toward PRIOR_TAU**2 with the weight of PRIOR_WEIGHT runs:
    tau^2 = ((R - 1) s^2 + w prior^2) / (R - 1 + w). Fewer than MIN_RUNS runs: the prior alone."""
    usable = [r for r in runs if any(n > 0 for _, n in r.values())]
    if len(usable) < MIN_RUNS:
        return RunSpread.prior(len(usable))
    ref = _reference(usable)
    fits = [run_shift(r, ref) for r in usable]
    shifts = [u for u, info in fits if info > 0]
    noise = [1.0 / info for _, info in fits if info > 0]
    if len(shifts) < MIN_RUNS:
        return RunSpread.prior(len(usable))
    mean = sum(shifts) / len(shifts)
    spread = sum((u - mean) ** 2 for u in shifts) / (len(shifts) - 1)
    raw = max(0.0, spread - sum(noise) / len(noise))
    dof = len(shifts) - 1
    shrunk = (dof * raw + PRIOR_WEIGHT * prior_tau**2) / (dof + PRIOR_WEIGHT)
    return RunSpread(tau=math.sqrt(shrunk), runs=len(shifts), method="moments", raw_tau=math.sqrt(raw))


# -- planning ---------------------------------------------------------------------------------------


def _cell_information(base_n: float, base_rate: float, head_n: float, head_rate: float) -> float:
    """A cell's information on the head's log odds ratio (both sides' binomial variances)."""
    wb = base_n * base_rate * (1 - base_rate)
    wh = head_n * head_rate * (1 - head_rate)
    return wb * wh / (wb + wh) if wb > 0 and wh > 0 else 0.0


def contrast_power(
    group_rates: Sequence[float],
    other_rates: Sequence[float],
    *,
    base_n: float,
    head_n: float,
    drop: float,
    level: float,
    spread: RunSpread,
) -> float:
    """Power of the cross-run tests to catch DROP in a group (BASE_N and HEAD_N trials a cell) at
    LEVEL (normal approximation), each cell at its own base rate (the group's cells GROUP_RATES,
    the others OTHER_RATES): the contrast's expected score, sum over the group of w_c delta_c times
    sqrt(W_rest / (W_all W_group)), against the level's quantile (w_c: a cell's information on its
    log odds ratio, delta_c: the drop on the logit scale at its rate). Averaged over the head run's
    level, N(0, tau^2) (three-point Gauss-Hermite): a run that answers better has rates nearer 1,
    where a trial tells less. A group that is the whole grid is the uniform test's. Plans the trials;
    the power stated is :mod:`.simulate`'s."""
    edge = 0.5 / (min(base_n, head_n) + 1.0)  # half a trial from 0 and 1, as the empirical logit

    def clamp(p: float) -> float:
        return min(max(p, edge), 1 - edge)

    def moved(p: float, shift: float) -> float:
        return clamp(_expit(_logit(p) + shift))

    group = [(clamp(p), clamp(p - drop)) for p in group_rates]
    effects = [_logit(p) - _logit(q) for p, q in group]
    others = [clamp(p) for p in other_rates]
    z = _NORMAL.inv_cdf(1 - level)
    total = 0.0
    for x, weight in _GAUSS_HERMITE:
        shift = spread.tau * x
        w_group = [_cell_information(base_n, p, head_n, moved(q, shift)) for p, q in group]
        total_group = sum(w_group)
        if total_group <= 0:
            continue
        total_rest = sum(_cell_information(base_n, p, head_n, moved(p, shift)) for p in others)
        score = sum(w * d for w, d in zip(w_group, effects, strict=True))
        if total_rest > 0:
            expected = score * math.sqrt(total_rest / ((total_group + total_rest) * total_group))
        else:
            expected = score / total_group / math.sqrt(1.0 / total_group + 2.0 * spread.tested_variance)
        total += weight * _NORMAL.cdf(expected - z)
    return total
