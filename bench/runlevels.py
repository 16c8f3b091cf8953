"""Verdicts across runs (issue 31): the base and the head each at their own run level.

``bench/verdicts.py`` gives the base and the head the same seed effect, which is right when both are
measured in the same job. But a model does not answer at the same level in every run (serving
changes, load, silent updates move a whole run up or down), and a base read from main's stored
results (``--baseline FILE``, the data branch) comes from another run. This replay adds that level:

* a trial's outcome is a Bernoulli draw at
  ``expit(logit(curve) + run level + seed effect + trial effect)``;
* the **run level** (normal, sd 0 / 0.15 / 0.3 / 0.6 on the logit scale: the row's "run sd") is
  shared by every trial of one run. *same job*: base and head share it (the action's default, both
  measured in one job); *cross-run*: the base's is drawn independently of the head's (a base from
  another run, no history); *cross-run + 6 history*: the same, and the base file carries the 6 stored
  earlier runs of main (other seeds), each at its own level, with its own seed effect and trials;
* the **seed effect** (sd ``SEED_SD``) is shared by the base's and the head's run (same seed: same
  needles and filler), the **trial effect** (sd ``TRIAL_SD``) by their trials of the same index.

What is real: the head's planning (``stats.power.plan_for`` on the base's counts, history included, as
``needle recall --baseline`` plans; the same job plans without a base, as a pull request does), the
plan's stated power, and the group-sequential decision (``stats.sequential.replay``: looks, spending,
pass rule, paired or stratified test, Holm). ``--decider`` picks the decision: ``today`` (history plans
the trials and stays out of the test; no run-level term) or ``runs`` (the run-level model of issue 31,
``needle_action.stats``/``compare`` from the ``runs`` branch, when it is there).

The power check: on every no-change row, the same draws' plan states a power to catch ``min_drop``
(20 points) in the middle group; a companion replay of the same curve with 20 points off the middle
depths on the head measures it. The stated power must be within 3 points of the measured one.

    python3 bench/runlevels.py [--prs 1000] [--seed 1] [--jobs 2] [--decider today|runs] [--no-docs]

``--seed-sd 0`` takes the seeds' effects out: every run's offset is then its level, and the stored
runs' spread is run level only. A base and its stored runs are drawn alike either way (an offset
``N(0, run sd^2 + seed sd^2)`` each); what differs is the head, which shares the base's seed but not
its level. The stated power reads only the base and the stored runs, so the two settings at one total
spread show what a figure from stored runs can and cannot know (docs/benchmarks.md).

writes its table between the markers ``runs-<decider>`` in docs/benchmarks.md (unless --no-docs).
"""

from __future__ import annotations

import argparse
import inspect
import json
import math
import sys
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.verdicts import (  # noqa: E402
    CELLS,
    DEPTHS,
    SEQUENTIAL,
    SIZES,
    TRIAL_SD,
    Scenario,
    _logit,
    codeword_data,
    flat,
    middle_drop,
    u_shape,
    write_docs,
)
from needle_action.config.model import RecallSettings  # noqa: E402
from needle_action.results import RecallPower  # noqa: E402
from needle_action.stats.groups import CellKey, planning_group, pooled  # noqa: E402
from needle_action.stats.power import plan_for  # noqa: E402

try:  # the power the comparison states, simulated (issue 31)
    from needle_action.stats.simulate import simulated_power
except ImportError:  # pragma: no cover - older trees
    simulated_power = None  # type: ignore[assignment]
from needle_action.stats.sequential import PromptData  # noqa: E402
from needle_action.stats.sequential import replay as sequential_replay  # noqa: E402

RUN_SDS = (0.0, 0.15, 0.3, 0.6)
SEED_SD = 0.3  # the seed's needles and filler: shared by a base and a head with the same seed
HISTORY_RUNS = 6
BASE_TRIALS = 20  # what main's run plans with no base known (trials "auto" at the defaults)
MAX_HEAD_TRIALS = 400  # stats.power.MAX_TRIALS
POWER_GAP = 0.03  # the stated power must be within this of the simulated one
STATED_PRS = 40  # PRs of a row whose stated power is computed (each replays its design 400 times)
SAME, CROSS, HISTORY = "same job", "cross-run", f"cross-run + {HISTORY_RUNS} history"
MODES = (SAME, CROSS, HISTORY)

CURVES = [
    Scenario("flat .8", flat(0.8), flat(0.8), False),
    Scenario("u .95/.6", u_shape(0.95, 0.6), u_shape(0.95, 0.6), False),
    Scenario("flat .95", flat(0.95), flat(0.95), False),
]
DROP = Scenario("flat .95, middle -30 pt", flat(0.95), middle_drop(flat(0.95), 0.3), True)
MIDDLE_CELLS = planning_group(SIZES, DEPTHS).cells


@dataclass(frozen=True)
class Row:
    scenario: Scenario
    run_sd: float
    mode: str
    power_of: str | None = None  # a power companion: the no-change row it measures
    head_drop: float = 0.0  # probability points off every middle trial of the head, at its own level


def power_companion(sc: Scenario, min_drop: float) -> Scenario:
    """SC unchanged on both curves, its head losing MIN_DROP on the middle depths *at the head run's
    own level* (:func:`draw_head`): what the stated power is for. Taking the points off the curve
    before the run level is added (``middle_drop``) would make the drop smaller than MIN_DROP in a run
    that answers better and larger in one that answers worse, so the measured power would not be the
    power to catch MIN_DROP."""
    return Scenario(f"{sc.name}, middle -{min_drop * 100:.0f} pt", sc.base, sc.head, True)


def rows(min_drop: float) -> list[Row]:
    out = [Row(sc, sd, mode) for sc in CURVES for mode in MODES for sd in RUN_SDS]
    out += [
        Row(power_companion(r.scenario, min_drop), r.run_sd, r.mode, r.scenario.name, min_drop)
        for r in list(out)
    ]
    return out + [Row(DROP, sd, mode) for mode in MODES for sd in RUN_SDS]


# -- the draws ---------------------------------------------------------------------------------------


def _expit(x: np.ndarray) -> np.ndarray:
    out: np.ndarray = 1.0 / (1.0 + np.exp(-x))
    return out


def _curve(c: Callable[[float, int], float]) -> np.ndarray:
    return _logit(np.array([c(d, s) for s, d in CELLS]))[None, :, None]


@dataclass
class RunDraws:
    """PRS pull requests' runs: the base [pr, cell, trial], its history [pr, run, cell, trial] (None:
    no history), and what the head needs to be drawn once its trials are planned."""

    base: np.ndarray
    history: np.ndarray | None
    head_logit: np.ndarray  # [pr, cell, 1]: the head's curve + its run level + the shared seed effect
    trial: np.ndarray  # [pr, cell, BASE_TRIALS]: trial effects the head shares with the base by index
    head_drop: np.ndarray  # [1, cell, 1]: probability points off each of the head's trials
    head: np.ndarray = field(default_factory=lambda: np.zeros((0, 0, 0), dtype=bool))


def draw_runs(rng: np.random.Generator, row: Row, prs: int) -> RunDraws:
    """The base and history of PRS pull requests of ROW (the head comes with :func:`draw_head`)."""
    sc, sd = row.scenario, row.run_sd
    seed = rng.normal(0.0, SEED_SD, (prs, 1, 1))
    trial = rng.normal(0.0, TRIAL_SD, (prs, len(CELLS), BASE_TRIALS))
    base_level = rng.normal(0.0, sd, (prs, 1, 1)) if sd else np.zeros((prs, 1, 1))
    head_level = base_level if row.mode == SAME else (rng.normal(0.0, sd, (prs, 1, 1)) if sd else base_level)
    base = rng.random(trial.shape) < _expit(_curve(sc.base) + base_level + seed + trial)
    history = None
    if row.mode == HISTORY:
        shape = (prs, HISTORY_RUNS, len(CELLS), BASE_TRIALS)
        levels = rng.normal(0.0, sd, (prs, HISTORY_RUNS, 1, 1)) if sd else 0.0
        seeds = rng.normal(0.0, SEED_SD, (prs, HISTORY_RUNS, 1, 1))
        logits = _curve(sc.base)[:, None] + levels + seeds + rng.normal(0.0, TRIAL_SD, shape)
        history = rng.random(shape) < _expit(logits)
    middle = np.array([k in set(MIDDLE_CELLS) for k in CELLS])
    head_drop = np.where(middle, row.head_drop, 0.0)[None, :, None]
    return RunDraws(base, history, _curve(sc.head) + head_level + seed, trial, head_drop)


def draw_head(rng: np.random.Generator, d: RunDraws, trials: int) -> None:
    """The head's TRIALS per cell: trial effects shared with the base's trials of the same index,
    fresh ones beyond the base's (no base trial asked those needles)."""
    prs, cells, _ = d.trial.shape
    extra = max(0, trials - BASE_TRIALS)
    effects = np.concatenate([d.trial, rng.normal(0.0, TRIAL_SD, (prs, cells, extra))], axis=2)[..., :trials]
    d.head = rng.random(effects.shape) < np.clip(_expit(d.head_logit + effects) - d.head_drop, 0.0, 1.0)


# -- planning: the real plan, memoised on what it reads -------------------------------------------------

_PLANS: dict[tuple[object, ...], RecallPower] = {}
PLAN_PARAMETERS = set(inspect.signature(plan_for).parameters)
PLAN_HAS_SPREAD = "spread" in PLAN_PARAMETERS  # issue 31's plan, when it is there
ALL_CELLS = tuple(CELLS)


def counts_of(d: RunDraws, pr: int, *, with_history: bool = True) -> dict[CellKey, tuple[int, int]]:
    """The base's counts as ``needle recall --baseline`` plans from them: its own cells plus (WITH_HISTORY)
    its pooled history (stats.pooling.base_counts)."""
    hits = d.base[pr].sum(axis=-1)
    trials = np.full(len(CELLS), d.base.shape[-1])
    if d.history is not None and with_history:
        hits = hits + d.history[pr].sum(axis=(0, 2))
        trials = trials + d.history.shape[1] * d.history.shape[-1]
    return {k: (int(h), int(n)) for k, h, n in zip(CELLS, hits, trials, strict=True)}


def history_counts(d: RunDraws, pr: int) -> list[dict[CellKey, tuple[int, int]]]:
    """Each stored earlier run's counts, one mapping a run (empty without history)."""
    if d.history is None:
        return []
    n = d.history.shape[-1]
    return [{k: (int(h), n) for k, h in zip(CELLS, run.sum(axis=-1), strict=True)} for run in d.history[pr]]


def plan_of(
    settings: RecallSettings,
    counts: dict[CellKey, tuple[int, int]] | None,
    spread: Any = None,
    base_trials: int | None = None,
) -> RecallPower:
    """``plan_for`` on COUNTS (None: no base known), memoised on the planning group's and the whole
    grid's pooled counts and the spread (with a spread the plan reads the whole grid: stats/runs.py)."""
    key: tuple[object, ...] = (-1,)
    if counts is not None and (spread is None or not PLAN_HAS_SPREAD):
        key = (pooled(counts, MIDDLE_CELLS),)  # what plan_run reads without a spread
    elif counts is not None:
        key = (pooled(counts, MIDDLE_CELLS), pooled(counts, ALL_CELLS), spread, base_trials)
    if key not in _PLANS:
        extra: dict[str, Any] = {}
        if spread is not None and PLAN_HAS_SPREAD:
            extra["spread"] = spread
            if "base_trials" in PLAN_PARAMETERS:  # the base trials per cell the cross-run test uses
                extra["base_trials"] = base_trials
        _PLANS[key] = plan_for(settings, SIZES, depths=DEPTHS, base=counts, **extra)
    return _PLANS[key]


# -- the decision ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Verdict:
    blocked: bool
    head_calls: int


def _data(d: RunDraws, pr: int, trials: int, settings: RecallSettings, **extra: Any) -> PromptData:
    base, head = d.base[pr], d.head[pr, :, :trials]
    return codeword_data(
        "p0", base, head, settings, planned=trials, base_planned=BASE_TRIALS, design=SEQUENTIAL, **extra
    )


def _verdict(data: PromptData, settings: RecallSettings) -> Verdict:
    decision = sequential_replay([data], settings.alpha)["p0"]
    return Verdict(decision.status == "fail", len(CELLS) * decision.trials)


class Today:
    """Today's decision (main before issue 31): the head plans from the base's counts, history
    included; the base's own trials against the head's, paired when both planned the same trials (same
    seed), history out of the test, no run-level term."""

    def plan(self, settings: RecallSettings, d: RunDraws, pr: int, mode: str) -> tuple[RecallPower, Any]:
        return plan_of(settings, None if mode == SAME else counts_of(d, pr)), None

    def data(self, d: RunDraws, pr: int, trials: int, settings: RecallSettings, context: Any) -> PromptData:
        return _data(d, pr, trials, settings, paired=trials == BASE_TRIALS)

    def decide(self, d: RunDraws, pr: int, trials: int, settings: RecallSettings, context: Any) -> Verdict:
        return _verdict(self.data(d, pr, trials, settings, context), settings)


class Runs:
    """Issue 31's run-level model (needle_action.stats.runs): the same job keeps today's test; a base
    from another run is tested across runs with the spread estimated from the stored runs (the stated
    prior with fewer than 3), the stored runs joining the base side run by run; the plan states the
    cross-run test's power."""

    def plan(self, settings: RecallSettings, d: RunDraws, pr: int, mode: str) -> tuple[RecallPower, Any]:
        from needle_action.stats.runs import estimate_spread

        if mode == SAME:
            return plan_of(settings, None), None
        history = history_counts(d, pr)
        spread = estimate_spread(history)
        base_trials = BASE_TRIALS * (1 + len(history))  # its own run's and its stored runs' join the test
        return plan_of(settings, counts_of(d, pr), _rounded(spread), base_trials), (spread, history)

    def data(self, d: RunDraws, pr: int, trials: int, settings: RecallSettings, context: Any) -> PromptData:
        if context is None:
            return _data(d, pr, trials, settings, paired=trials == BASE_TRIALS)
        spread, history = context
        return _data(d, pr, trials, settings, paired=False, spread=spread, history={"codeword": history})

    def decide(self, d: RunDraws, pr: int, trials: int, settings: RecallSettings, context: Any) -> Verdict:
        return _verdict(self.data(d, pr, trials, settings, context), settings)


def _rounded(spread: Any) -> Any:
    """SPREAD with tau to 2 decimals (plans memoise on it; a plan is no finer than that)."""
    return replace(spread, tau=round(spread.tau, 2), raw_tau=None)


DECIDERS: dict[str, Any] = {"today": Today(), "runs": Runs()}


# -- a row -------------------------------------------------------------------------------------------


@dataclass
class RowTally:
    prs: int = 0
    blocked: int = 0
    head_calls: int = 0
    fixed_calls: int = 0  # the head calls of each PR's plan, every trial asked
    planned: int = 0  # head trials per cell planned, summed
    clipped: int = 0  # plans above what was drawn (never, unless MAX_HEAD_TRIALS is lowered)
    stated_power: float = 0.0  # the comparison's simulated figure, summed over the first STATED_PRS PRs
    stated_prs: int = 0
    stated_squares: float = 0.0  # the squares of the figures, summed over the PRs counted in squared_prs
    squared_prs: int = 0  # (tallies saved before these fields have none: their spread is not known)
    planned_power: float = 0.0  # the plan's own figure (normal approximation), summed over PRs
    seconds: float = 0.0

    @property
    def rate(self) -> float:
        return self.blocked / self.prs if self.prs else 0.0

    def upper(self) -> float:
        return upper_bound(self.blocked, self.prs)

    def stated_stderr(self) -> float | None:
        """The standard error of the mean stated figure, from the spread of the PRs' own figures
        (None when fewer than two were kept with their squares)."""
        n = self.squared_prs
        if n < 2 or not self.stated_prs:
            return None
        mean = self.stated_power / self.stated_prs
        variance = max(0.0, self.stated_squares / n - mean * mean) * n / (n - 1)
        return math.sqrt(variance / self.stated_prs)


def gap_stderr(stated: RowTally, companion: RowTally) -> float | None:
    """The standard error of stated minus measured power: the stated mean's and the companion's
    binomial rate's, independent draws."""
    s = stated.stated_stderr()
    if s is None or not companion.prs:
        return None
    m = companion.rate
    return math.sqrt(s * s + m * (1 - m) / companion.prs)


def stated_power(data: PromptData, settings: RecallSettings) -> float | None:
    """The power the comparison states for DATA's design (``stats.simulate.simulated_power``: the
    design replayed on draws from the base's fitted model, as ``needle report`` and the comment
    state it), None on trees without it."""
    if simulated_power is None:
        return None
    figure = simulated_power(data, settings.alpha, settings.min_drop)
    return None if figure is None else figure.power


def run_row(row: Row, prs: int, seed: int, decider: str = "today", stated_prs: int = STATED_PRS) -> RowTally:
    settings = RecallSettings(sizes=SIZES, depths=DEPTHS)
    method = DECIDERS[decider]
    rng = np.random.default_rng(seed)
    started = time.perf_counter()
    d = draw_runs(rng, row, prs)
    plans = [method.plan(settings, d, pr, row.mode) for pr in range(prs)]
    draw_head(rng, d, min(MAX_HEAD_TRIALS, max(p.trials for p, _ in plans)))
    t = RowTally()
    for pr, (plan, context) in enumerate(plans):
        trials = min(plan.trials, d.head.shape[-1])
        v = method.decide(d, pr, trials, settings, context)
        t.prs += 1
        t.blocked += v.blocked
        t.head_calls += v.head_calls
        t.fixed_calls += len(CELLS) * trials
        t.planned += trials
        t.clipped += trials < plan.trials
        t.planned_power += plan.power
        if pr < stated_prs:
            figure = stated_power(method.data(d, pr, trials, settings, context), settings)
            if figure is not None:
                t.stated_power += figure
                t.stated_prs += 1
                t.stated_squares += figure * figure
                t.squared_prs += 1
    t.seconds = time.perf_counter() - started
    return t


def _binomial_cdf(k: int, n: int, p: float) -> float:
    """P(X <= K) for X ~ Binomial(N, P), summed in log space (no overflow at thousands of PRs)."""
    if p <= 0.0:
        return 1.0
    if p >= 1.0:
        return 1.0 if k >= n else 0.0
    lp, lq, lgn = math.log(p), math.log1p(-p), math.lgamma(n + 1)
    return min(
        1.0,
        sum(
            math.exp(lgn - math.lgamma(i + 1) - math.lgamma(n - i + 1) + i * lp + (n - i) * lq)
            for i in range(k + 1)
        ),
    )


def upper_bound(k: int, n: int, conf: float = 0.95) -> float:
    """One-sided CONF upper bound on a rate seen K times in N (exact, Clopper-Pearson)."""
    if k >= n:
        return 1.0
    lo, hi = k / n, 1.0
    for _ in range(50):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if _binomial_cdf(k, n, mid) > 1 - conf else (lo, mid)
    return hi


STATED_FIELDS = ("stated_power", "stated_prs", "stated_squares", "squared_prs")  # a row's stated columns


def _tallies(path: Path) -> dict[int, RowTally]:
    return {int(i): RowTally(**t) for i, t in json.loads(path.read_text())["rows"].items()}


def pooled_tally(a: RowTally, b: RowTally) -> RowTally:
    """Two independent runs of one row (other seeds) as one: every field is a sum."""
    return RowTally(**{k: v + getattr(b, k) for k, v in asdict(a).items()})


def _job(args: tuple[int, int, int, str, int, float]) -> tuple[int, RowTally]:
    """Row I (by index: the curves are closures, which do not pickle) in a worker process, its seeds'
    effects at SEED_SD."""
    global SEED_SD
    i, prs, seed, decider, stated, SEED_SD = args
    row = rows(RecallSettings().min_drop)[i]
    checked = not row.power_of and not row.scenario.must_block  # the rows whose power is checked
    return i, run_row(row, prs, seed, decider, stated if checked else 0)


# -- the table ---------------------------------------------------------------------------------------


def _pct(x: float) -> str:
    return f"{x * 100:.1f}%"


def table(results: list[tuple[Row, RowTally]]) -> str:
    power = {(r.power_of, r.run_sd, r.mode): t for r, t in results if r.power_of}
    lines = [
        "| scenario (base → head) | base | run sd | PRs | blocked (95% upper) | head trials / cell "
        "(mean plan) | head calls (of the plan's) | plan's power (normal approx.) | stated power (simulated; "
        "PRs) | measured power (-20 pt) | stated − measured (its s.e.) | within 3 pt |",
        "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|:-:|",
    ]
    for r, t in results:
        if r.power_of:
            continue
        upper = "" if r.scenario.must_block else f" ({_pct(t.upper())})"
        companion = power.get((r.scenario.name, r.run_sd, r.mode))
        stated = t.stated_power / t.stated_prs if t.stated_prs else None
        shown = f"{_pct(stated)} ({t.stated_prs})" if stated is not None else "–"
        planned = f"{_pct(t.planned_power / t.prs)} | {shown}"
        if companion is not None:
            measured = companion.rate
            ok = "yes" if stated is not None and abs(stated - measured) <= POWER_GAP else "**no**"
            se = gap_stderr(t, companion)
            gap = "–" if stated is None else f"{(stated - measured) * 100:+.1f}"
            gap += "" if se is None else f" ({se * 100:.1f})"
            power_cols = f"{planned} | {_pct(measured)} | {gap} | {ok}"
        else:
            power_cols = f"{planned} | – | – | –"
        lines.append(
            f"| {r.scenario.name} | {r.mode} | {r.run_sd:g} | {t.prs:,} | **{_pct(t.rate)}**{upper} | "
            f"{t.planned / t.prs:.1f} | {t.head_calls / t.prs:.0f} ({t.head_calls / t.fixed_calls:.0%}) | "
            f"{power_cols} |"
        )
    return "\n".join(lines)


def _prs_per_row(results: list[tuple[Row, RowTally]]) -> str:
    counts = sorted({t.prs for _, t in results})
    return f"{counts[0]:,} PRs per row" if len(counts) == 1 else "PRs per row in the PRs column"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prs", type=int, default=1000, help="pull requests per row")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--stated-prs", type=int, default=STATED_PRS, help="PRs a row whose stated power is simulated"
    )
    parser.add_argument("--jobs", type=int, default=2, help="rows replayed at once (processes)")
    parser.add_argument("--decider", choices=sorted(DECIDERS), default="today")
    parser.add_argument("--rows", help="only these rows (comma-separated indices)")
    parser.add_argument("--save", type=Path, help="also write every row's tally here (JSON)")
    parser.add_argument(
        "--load", type=Path, nargs="*", default=[], help="tallies saved earlier: add, do not rerun"
    )
    parser.add_argument(
        "--pool",
        type=Path,
        nargs="*",
        default=[],
        help="tallies of the same rows at other seeds: summed into the loaded ones (more PRs a row)",
    )
    parser.add_argument(
        "--stated-from",
        type=Path,
        nargs="*",
        default=[],
        help="take the stated-power columns from these saved tallies (runs with more stated PRs; summed)",
    )
    parser.add_argument(
        "--seed-sd",
        type=float,
        default=SEED_SD,
        help="the seeds' effect (0: every run's offset is its level; stored runs' spread is run level only)",
    )
    parser.add_argument("--no-docs", action="store_true", help="print only")
    args = parser.parse_args(argv)
    settings = RecallSettings(sizes=SIZES, depths=DEPTHS)
    every = rows(settings.min_drop)
    done: dict[int, RowTally] = {}
    for path in args.load:
        done.update(_tallies(path))
    for path in args.pool:
        for i, t in _tallies(path).items():
            done[i] = pooled_tally(done[i], t) if i in done else t
    wanted = {int(i) for i in args.rows.split(",")} if args.rows else set(range(len(every)))
    jobs = [
        (i, args.prs, args.seed + i, args.decider, args.stated_prs, args.seed_sd)
        for i in sorted(wanted - set(done))
    ]
    started = time.perf_counter()
    with ProcessPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        for i, t in pool.map(_job, jobs):
            done[i] = t
            r = every[i]
            print(
                f"{i}: {r.scenario.name} | {r.mode} | sd {r.run_sd}: {t.blocked}/{t.prs} "
                f"(plan {t.planned_power / t.prs:.3f}, stated {t.stated_power / max(1, t.stated_prs):.3f}), "
                f"{t.seconds:.0f} s",
                file=sys.stderr,
            )
            if args.save:  # after every row: a long sweep that fails late keeps what it measured
                rows_json = {str(k): asdict(v) for k, v in sorted(done.items())}
                args.save.write_text(json.dumps({"decider": args.decider, "rows": rows_json}, indent=1))
    seconds = sum(t.seconds for t in done.values())
    wall = (
        f" ({args.jobs} processes, {time.perf_counter() - started:.0f} s wall)"
        if jobs
        else " (saved tallies)"
    )
    stated = [_tallies(path) for path in args.stated_from]
    for i in done:
        figures = [t[i] for t in stated if i in t and t[i].stated_prs]
        for name in STATED_FIELDS if figures else ():
            setattr(done[i], name, sum(getattr(t, name) for t in figures))
    results = [(every[i], done[i]) for i in sorted(done)]
    text = (
        f"Decision: `{args.decider}`. Defaults (threshold {settings.threshold}, family alpha {settings.alpha}, "
        f'min_drop {settings.min_drop}, trials "auto"), sizes {SIZES} x depths {DEPTHS}; base runs plan '
        f"{BASE_TRIALS} trials per cell; seed effect sd {args.seed_sd}, trial effect sd {TRIAL_SD}; "
        f"{_prs_per_row(results)}, seed {args.seed}, "
        f"{sum(t.prs for _, t in results):,} PRs (power companions included), {seconds:.0f} s of replay summed "
        f"over the rows{wall}.\n\n" + table(results)
    )
    print(text)
    if not args.no_docs and len(done) == len(every) and args.seed_sd == SEED_SD:
        write_docs(text, f"<!-- runs-{args.decider}:begin -->", f"<!-- runs-{args.decider}:end -->")
    return 0


if __name__ == "__main__":
    sys.exit(main())
