"""The power a comparison really has, measured by replaying its own design (issue 31).

A normal approximation of one group's test (stats/power.py, which plans the trials) misses most of
what the comparison does: three looks that spend alpha, Holm over every group of every style, the
pass rule stopping early, the floor under which no drop is tested, the contrast across runs and the
information at each cell's own rate. Against a simulation of the design it stated 95% where 72-80%
was caught, and 37% where 60% was (docs/benchmarks.md, "Verdicts across runs"). So the power the
comparison and ``needle plan`` state is this module's: pull requests drawn from the base's fitted
model, each replayed through :func:`~needle_action.stats.sequential.replay` exactly as a real one
is, the fraction blocked.

The model each replay draws from
--------------------------------
* every cell's rate is the base's (with its stored runs, their levels fitted: ``RunsFit``), half a
  trial from 0 and 1;
* every run has its level on the logit scale: in one job the base and the head share it; across
  runs the base, the head and each stored run draw their own, ``N(0, tau^2)`` at the comparison's
  spread (the stated prior when it has no estimate);
* the head answers each trial of the planning group's cells (the middle depths) DROP less often
  than its run would have: a drop in probability points at the head run's own level;
* the base and stored runs keep their own trials per cell, the head runs the planned trials.

Replaying at rates measured from 20 trials a cell is biased, since power is curved in the rates
(convex where it is low, concave where it is high): a U-shaped base across runs read 17.7% where
12.1% was caught. Each replay is paired with one at a model measured again from a base drawn at the
first, on the same random numbers, and the figure is twice the first fraction minus the second (a
parametric bootstrap bias correction): 13.9% on that base.

Deterministic (the seed is a digest of the question: :func:`question_seed`), so ``needle report``
restates the same figure, and memoised. Pure: stdlib only.
"""

from __future__ import annotations

import functools
import hashlib
import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from needle_action.stats.groups import CellKey, planning_group
from needle_action.stats.runs import RunsFit, RunSpread, summed
from needle_action.stats.sequential import Answers, Design, PromptData, replay

REPS = 300  # replay pairs per figure: a standard error of about 3 points at 50%, 2 at 90%
MIN_REPS = 100  # a large design replays fewer; below this many it is not simulated
# trial draws one figure may make: a bound on its time whatever the grid (3 sizes x 5 depths across
# runs with 6 stored runs: 300 pairs in about 8 s on one core)
WORK = 8_000_000
Counts = Mapping[CellKey, tuple[int, int]]


@dataclass(frozen=True)
class SimulatedPower:
    """The fraction of REPS simulated pull requests with the drop that the design blocked."""

    power: float
    reps: int

    @property
    def stderr(self) -> float:
        return math.sqrt(max(self.power * (1 - self.power), 1e-4) / self.reps)


def _counts(answers: Answers) -> dict[CellKey, tuple[int, int]]:
    return {k: (sum(hit for _, hit in v), len(v)) for k, v in answers.items() if v}


def _logit(p: float) -> float:
    return math.log(p / (1.0 - p))


def _expit(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-min(max(x, -30.0), 30.0)))


def cell_logits(base: Counts, history: Sequence[Counts]) -> dict[CellKey, float]:
    """Each cell's logit at the runs' mean level: with stored runs, the fit of cell effects and run
    levels (their mean is the level a new run is drawn around); alone, the base's own rates: each
    cell at its measured rate, kept half a trial from 0 and 1 (a cell answered perfectly is not
    certain). Not the empirical logit's (h + 0.5) / (n + 1), which reads 19 of 20 as .93: near 1 a
    cell at .93 carries 40% more information than one at .95."""
    runs = [base, *history]
    pooled = summed(runs)
    out = {k: _logit(min(max(h / n, 0.5 / n), 1.0 - 0.5 / n)) for k, (h, n) in pooled.items() if n > 0}
    if len(runs) > 1:
        fit = RunsFit(runs)
        mean = sum(fit.u) / len(fit.u)
        out.update({k: a + mean for k, a in zip(fit.cells, fit.a, strict=True)})
    return out


@dataclass(frozen=True)
class _Style:
    """One needle style's model: each cell's logit, the base's and each stored run's trials a cell."""

    logits: tuple[tuple[CellKey, float], ...]
    base_trials: tuple[tuple[CellKey, int], ...]
    stored_trials: tuple[tuple[tuple[CellKey, int], ...], ...]

    def remeasured(self, rnd: random.Random, tau: float) -> _Style:
        """The model another base (and stored runs) drawn from this one would give: the same runs'
        trials, each run at its own level, estimated again (the parametric bootstrap)."""
        logits = dict(self.logits)
        base = _counts(_draw(rnd, logits, dict(self.base_trials), rnd.gauss(0.0, tau) if tau else 0.0))
        stored = [
            _counts(_draw(rnd, logits, dict(run), rnd.gauss(0.0, tau) if tau else 0.0))
            for run in self.stored_trials
        ]
        again = cell_logits(base, stored)
        return replace(self, logits=tuple(sorted({**logits, **again}.items())))


@dataclass(frozen=True)
class _Design:
    """PromptData's fields that are the design (not the answers)."""

    name: str
    sizes: tuple[int, ...]
    depths: tuple[float, ...]
    planned: int
    floor: float
    paired: bool
    base_planned: int
    design: Design
    spread: RunSpread | None


@dataclass(frozen=True)
class _Question:
    """Everything a figure depends on (hashable: the figure is memoised on it)."""

    data: _Design
    styles: tuple[tuple[str, _Style], ...]
    alpha: float
    drop: float
    reps: int


def _style(base: Counts, stored: Sequence[Counts]) -> _Style:
    return _Style(
        logits=tuple(sorted(cell_logits(base, stored).items())),
        base_trials=tuple(sorted((k, n) for k, (_, n) in base.items())),
        stored_trials=tuple(tuple(sorted((k, n) for k, (_, n) in run.items())) for run in stored),
    )


def _work(data: PromptData) -> int:
    """Trial draws of one replay of DATA's design."""
    cells = sum(len(base) for base, _ in data.grids.values())
    runs = 1 + max((len(h) for h in data.history.values()), default=0)
    return 2 * max(1, cells * (data.planned + 2 * runs * max(1, data.base_planned)))  # replays in pairs


def simulated_power(
    data: PromptData, alpha: float, drop: float, *, reps: int = REPS
) -> SimulatedPower | None:
    """The power of DATA's design (its base, stored runs, spread, planned head trials, stop rules,
    pairing, floor) to catch DROP in the planning group's cells of every style, at family ALPHA.
    DATA's head answers are not read. None when the base has no trial to draw from, or when the
    design is too large to replay MIN_REPS times within WORK (the caller falls back to the plan's
    normal approximation and says so)."""
    question = question_of(data, alpha, drop, reps=reps)
    return None if question is None else _simulated(question)


def question_of(data: PromptData, alpha: float, drop: float, *, reps: int = REPS) -> _Question | None:
    """What a figure for DATA depends on (None: nothing to replay, or too large to; see above)."""
    bases = {style: _counts(base) for style, (base, _) in data.grids.items()}
    if data.planned <= 0 or not any(bases.values()) or WORK // _work(data) < MIN_REPS:
        return None
    styles = tuple(
        (style, _style(counts, data.history.get(style, ()) if data.spread is not None else ()))
        for style, counts in sorted(bases.items())
        if counts
    )
    design = _Design(
        data.name,
        tuple(data.sizes),
        tuple(data.depths),
        data.planned,
        data.floor,
        data.paired,
        data.base_planned,
        data.design,
        data.spread,
    )
    return _Question(
        data=design,
        styles=styles,
        alpha=alpha,
        drop=round(drop, 6),
        reps=min(reps, WORK // _work(data)),
    )


def _template(d: _Design) -> PromptData:
    return PromptData(
        name=d.name,
        grids={},
        sizes=list(d.sizes),
        depths=list(d.depths),
        planned=d.planned,
        floor=d.floor,
        paired=d.paired,
        base_planned=d.base_planned,
        design=d.design,
        spread=d.spread,
    )


def question_seed(q: _Question) -> int:
    """The replays' seed: a digest of the question (the prompt's name aside). The same question gets
    the same figure (``needle report`` restates it); another base draws other numbers. One seed for
    every question made the replays' own noise (about 3 points at 300 pairs) the same in every
    comparison, so it never averaged out: across the benchmark's pull requests it was a bias."""
    anonymous = replace(q, data=replace(q.data, name=""))
    return int.from_bytes(hashlib.sha256(repr(anonymous).encode("utf-8")).digest()[:8], "big")


@functools.lru_cache(maxsize=256)  # the comment, the terminal and the JSON ask the same question
def _simulated(q: _Question) -> SimulatedPower:
    """The fraction blocked at the base's measured rates, corrected for their own noise. Power is
    curved in the rates, so replaying at rates measured from 20 trials a cell is biased (about 2
    points high on a flat .8 base across runs, 5 on a U-shaped one); each replay is paired with one
    at rates measured again from a base drawn at the first (the same random numbers), and twice the
    first fraction minus the second removes that bias to first order (a bootstrap bias correction)."""
    template = _template(q.data)
    tau = q.data.spread.tau if q.data.spread is not None else 0.0
    rnd = random.Random(question_seed(q))
    at_estimate = at_remeasured = 0
    for _ in range(q.reps):
        seed = rnd.getrandbits(64)
        again = tuple((style, model.remeasured(rnd, tau)) for style, model in q.styles)
        at_estimate += _one(template, q.styles, q, random.Random(seed))
        at_remeasured += _one(template, again, q, random.Random(seed))
    power = min(1.0, max(0.0, (2 * at_estimate - at_remeasured) / q.reps))
    return SimulatedPower(power=round(power, 4), reps=q.reps)


def _one(
    template: PromptData, styles: tuple[tuple[str, _Style], ...], q: _Question, rnd: random.Random
) -> bool:
    """One simulated pull request: every run at its level, the design replayed; blocked?"""
    spread = template.spread
    tau = spread.tau if spread is not None else 0.0
    base_level = rnd.gauss(0.0, tau) if tau else 0.0
    head_level = rnd.gauss(0.0, tau) if tau else base_level  # one job: one level
    middle = set(planning_group(template.sizes, template.depths).cells)
    grids: dict[str, tuple[Answers, Answers]] = {}
    history: dict[str, list[Counts]] = {}
    for style, model in styles:
        logits = dict(model.logits)
        grids[style] = (
            _draw(rnd, logits, dict(model.base_trials), base_level),
            _draw(rnd, logits, dict.fromkeys(logits, template.planned), head_level, q.drop, middle),
        )
        history[style] = [
            _counts(_draw(rnd, logits, dict(run), rnd.gauss(0.0, tau) if tau else 0.0))
            for run in model.stored_trials
        ]
    data = replace(template, grids=grids, history=history if spread is not None else {})
    return replay([data], q.alpha)[data.name].status == "fail"


def _draw(
    rnd: random.Random,
    logits: Mapping[CellKey, float],
    trials: Mapping[CellKey, int],
    level: float,
    drop: float = 0.0,
    dropped: frozenset[CellKey] | set[CellKey] = frozenset(),
) -> dict[CellKey, list[tuple[int, bool]]]:
    """One run's answers: TRIALS a cell at its logit plus the run's LEVEL, DROP probability points
    off every trial of the DROPPED cells."""
    out = {}
    for k, n in trials.items():
        if k not in logits:
            continue
        p = _expit(logits[k] + level) - (drop if k in dropped else 0.0)
        out[k] = [(i, rnd.random() < p) for i in range(n)]
    return out
