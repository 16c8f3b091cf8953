"""Verdict benchmark (and the data behind tests/integration/test_verdicts_replay.py): replay the real
decision functions of needle on draws from known recall curves, thousands of pull requests in
seconds, and measure how often they are right and how many head calls they cost.

What is real: the trial planning (``recall.power.plan_for``), the group-sequential decision the
scheduler's look gate and the compare stage both take (``recall.sequential.replay``: looks, alpha
spending, pass rule, exact stratified or paired test, Holm over the pull request's family), and,
on a sample of every row, the whole path from a run's cells to the exit code (``engine.summarize``
-> ``history.pool_history`` -> ``compare.compare`` -> ``policy.comparison_exit_code``), checked to
agree with the replay. What is simulated: the model. A trial's outcome is a Bernoulli draw at
``expit(logit(curve) + seed effect + trial effect)``: the **seed effect** (normal, sd 0 / 0.3 /
0.6 on the logit scale) is shared by every trial of one run, since a run's needles and filler come
from its seed, and base and head share it (same seed); the **trial effect** (sd ``TRIAL_SD``) is
shared by the base's and the head's trial of the same index (the same needle and filler).
History runs (other seeds) draw their own effects: a run is a cluster.

The grid and settings are the defaults a new user gets (``RecallSettings()``: threshold 0.8, family
alpha 0.01, min_drop 0.2, trials "auto"), on sizes [2000, 8000, 16000] x depths 0-1 by 0.25.

    python3 bench/verdicts.py [--prs 2000] [--null-prs 5000] [--seed 1] [--no-docs] [--rows 0,3]

writes the table between the markers in docs/benchmarks.md (unless --no-docs) and prints it.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from needle_action.compare import compare  # noqa: E402
from needle_action.compare.recall import test_styled_groups  # noqa: E402
from needle_action.config.model import PromptConfig, RecallSettings  # noqa: E402
from needle_action.core.errors import EXIT_CHECKS_FAILED  # noqa: E402
from needle_action.pipeline.policy import comparison_exit_code  # noqa: E402
from needle_action.recall.plan.prompt import RecallOverrides, effective_prompt  # noqa: E402
from needle_action.recall.run.engine import summarize  # noqa: E402
from needle_action.recall.run.scheduler import CellRun, PromptPlan, RunOutcome  # noqa: E402
from needle_action.results import PromptResult, RecallAnswer, RecallPower, RecallResult, Results  # noqa: E402
from needle_action.stats.groups import CellKey, cell_key  # noqa: E402
from needle_action.stats.pooling import pool_history  # noqa: E402
from needle_action.stats.power import plan_for  # noqa: E402
from needle_action.stats.sequential import (  # noqa: E402
    FIXED,
    FUTILITY,
    Design,
    PromptData,
    drop_floor,
)
from needle_action.stats.sequential import replay as sequential_replay  # noqa: E402

SIZES = [2000, 8000, 16000]
DEPTHS = [0.0, 0.25, 0.5, 0.75, 1.0]
CELLS: list[CellKey] = [cell_key(s, d) for s in SIZES for d in DEPTHS]
MIDDLE = (0.25, 0.5, 0.75)
SEED_SDS = (0.0, 0.3, 0.6)
TRIAL_SD = 0.5  # the same needle and filler on both sides: their trials are alike, not identical
HISTORY_RUNS = 3
CHECK_PRS = 20  # PRs per row also sent through results -> compare -> exit code (must agree)
DOCS = REPO / "docs" / "benchmarks.md"
BEGIN, END = "<!-- verdicts:begin -->", "<!-- verdicts:end -->"

Curve = Callable[[float, int], float]


def flat(p: float) -> Curve:
    return lambda depth, size: p


def u_shape(edge: float, middle: float) -> Curve:
    """Lost in the middle: EDGE at depths 0 and 1, MIDDLE at 0.5, quadratic in between."""
    return lambda depth, size: middle + (edge - middle) * (2.0 * depth - 1.0) ** 2


def cliff(at_size: int, before: float = 0.95, after: float = 0.1) -> Curve:
    return lambda depth, size: before if size < at_size else after


def middle_drop(curve: Curve, drop: float, depths: tuple[float, ...] = MIDDLE) -> Curve:
    """CURVE with DROP taken off at DEPTHS (the middle, 0.25-0.75, by default), at every size."""
    return lambda depth, size: max(0.0, curve(depth, size) - (drop if depth in depths else 0.0))


@dataclass(frozen=True)
class Scenario:
    name: str
    base: Curve
    head: Curve
    must_block: bool
    prompts: int = 1  # prompts the pull request touches (each on the same curves)


NULLS = [
    Scenario("flat .95", flat(0.95), flat(0.95), False),
    Scenario("flat .8", flat(0.8), flat(0.8), False),
    Scenario("u .95/.2", u_shape(0.95, 0.2), u_shape(0.95, 0.2), False),
    Scenario("u .95/.6", u_shape(0.95, 0.6), u_shape(0.95, 0.6), False),
    Scenario("u .95/.9", u_shape(0.95, 0.9), u_shape(0.95, 0.9), False),
    Scenario("cliff at 12K", cliff(12_000), cliff(12_000), False),
]
FOUR = Scenario("4 prompts, u .95/.6", u_shape(0.95, 0.6), u_shape(0.95, 0.6), False, prompts=4)
DROPS = [
    Scenario("flat .95, middle -30 pt", flat(0.95), middle_drop(flat(0.95), 0.3), True),
    Scenario("u .95/.9, middle -30 pt", u_shape(0.95, 0.9), middle_drop(u_shape(0.95, 0.9), 0.3), True),
    Scenario("u .95/.6, middle -30 pt", u_shape(0.95, 0.6), middle_drop(u_shape(0.95, 0.6), 0.3), True),
    Scenario("flat .95, middle -20 pt", flat(0.95), middle_drop(flat(0.95), 0.2), True),
    Scenario("u .95/.9, middle -20 pt", u_shape(0.95, 0.9), middle_drop(u_shape(0.95, 0.9), 0.2), True),
    Scenario("u .95/.6, middle -20 pt", u_shape(0.95, 0.6), middle_drop(u_shape(0.95, 0.6), 0.2), True),
    Scenario(
        "u .95/.6, depth 50% only -30 pt",
        u_shape(0.95, 0.6),
        middle_drop(u_shape(0.95, 0.6), 0.3, (0.5,)),
        True,
    ),
]
SCENARIOS = [*NULLS, FOUR, *DROPS]
SEQUENTIAL = Design()


def default_plan(settings: RecallSettings) -> RecallPower:
    """What trials = "auto" plans on the grid with no base known (what a pull request runs)."""
    return plan_for(settings, SIZES, depths=DEPTHS)


def _logit(p: np.ndarray) -> np.ndarray:
    p = np.clip(p, 1e-6, 1 - 1e-6)
    out: np.ndarray = np.log(p / (1 - p))
    return out


@dataclass
class Draws:
    """Every trial outcome of PRS pull requests: [pr, prompt, cell, trial] booleans."""

    base: np.ndarray
    head: np.ndarray
    history: np.ndarray  # [pr, prompt, run, cell, trial]


def draw(rng: np.random.Generator, sc: Scenario, prs: int, trials: int, seed_sd: float) -> Draws:
    shape = (prs, sc.prompts, len(CELLS), trials)
    lb = _logit(np.array([sc.base(d, s) for s, d in CELLS]))[None, None, :, None]
    lh = _logit(np.array([sc.head(d, s) for s, d in CELLS]))[None, None, :, None]
    seed = rng.normal(0.0, seed_sd, (prs, sc.prompts, 1, 1)) if seed_sd else 0.0
    trial = rng.normal(0.0, TRIAL_SD, shape) if TRIAL_SD else 0.0
    base = rng.random(shape) < 1 / (1 + np.exp(-(lb + seed + trial)))
    head = rng.random(shape) < 1 / (1 + np.exp(-(lh + seed + trial)))
    hshape = (prs, sc.prompts, HISTORY_RUNS, len(CELLS), trials)
    hseed = rng.normal(0.0, seed_sd, (prs, sc.prompts, HISTORY_RUNS, 1, 1)) if seed_sd else 0.0
    htrial = rng.normal(0.0, TRIAL_SD, hshape) if TRIAL_SD else 0.0
    history = rng.random(hshape) < 1 / (1 + np.exp(-(lb[:, :, None] + hseed + htrial)))
    return Draws(base, head, history)


def _answers(outcomes: np.ndarray) -> dict[CellKey, list[tuple[int, bool]]]:
    return {key: list(enumerate(row.tolist())) for key, row in zip(CELLS, outcomes, strict=True)}


def codeword_data(
    name: str, base: np.ndarray, head: np.ndarray, settings: RecallSettings, **fields: Any
) -> PromptData:
    """A prompt on the grid with one needle style: BASE's and HEAD's outcomes [cell, trial], the
    floor from SETTINGS; FIELDS: the rest of :class:`PromptData` (planned, design, paired, ...)."""
    grids = {"codeword": (_answers(base), _answers(head))}
    return PromptData(
        name=name, grids=grids, sizes=SIZES, depths=DEPTHS, floor=drop_floor(settings.min_drop), **fields
    )


def prompt_data(d: Draws, pr: int, prompt: int, design: Design, settings: RecallSettings) -> PromptData:
    trials = d.head.shape[-1]
    base, head = d.base[pr, prompt], d.head[pr, prompt]
    return codeword_data(
        f"p{prompt}", base, head, settings, planned=trials, paired=True, base_planned=trials, design=design
    )


def decide(d: Draws, pr: int, design: Design, settings: RecallSettings) -> tuple[bool, int]:
    """(blocked, head calls) of pull request PR under DESIGN: the real sequential replay."""
    datas = [prompt_data(d, pr, p, design, settings) for p in range(d.head.shape[1])]
    decisions = sequential_replay(datas, settings.alpha)
    blocked = any(x.status == "fail" for x in decisions.values())
    return blocked, sum(len(CELLS) * x.trials for x in decisions.values())


def pooled_test_blocks(d: Draws, pr: int, settings: RecallSettings) -> bool:
    """The pre-issue-21 test: history pooled into the base as independent trials, unpaired, fixed."""
    for p in range(d.head.shape[1]):
        base = d.base[pr, p].sum(axis=-1) + d.history[pr, p].sum(axis=(0, 2))
        n_base = d.base.shape[-1] * (1 + HISTORY_RUNS)
        head = d.head[pr, p].sum(axis=-1)
        b = {k: (int(h), n_base) for k, h in zip(CELLS, base, strict=True)}
        h = {k: (int(x), d.head.shape[-1]) for k, x in zip(CELLS, head, strict=True)}
        tests = test_styled_groups(
            {"": (b, h)},
            SIZES,
            DEPTHS,
            alpha=settings.alpha / d.head.shape[1],
            floor=drop_floor(settings.min_drop),
        )
        if any(t.regressed for t in tests):
            return True
    return False


# -- the whole path, on a sample: results files -> compare -> exit code ---------------------------


def _prompt_config(settings: RecallSettings) -> PromptConfig:
    prompt = PromptConfig(name="rag", template="prompts/rag.j2", recall=settings)
    return effective_prompt(prompt, RecallOverrides(full_trials=True))


def run_result(
    outcomes: np.ndarray,
    prompt: PromptConfig,
    power: RecallPower,
    *,
    seed: int,
    key: str,
    upto: int | None = None,
) -> RecallResult:
    """One run's cells (the first UPTO trials: where a look stopped it) summarised by the engine."""
    trials = power.trials if upto is None else upto
    cells = []
    for (size, depth), row in zip(CELLS, outcomes, strict=True):
        cell = CellRun(
            size, depth, power.trials, hits=int(row[:trials].sum()), done=trials, next_count=trials
        )
        cell.answers = [
            RecallAnswer(trial=i, needle="x", answer="", hit=bool(h)) for i, h in enumerate(row[:trials])
        ]
        cell.issued, cell.settled = trials, True
        cells.append(cell)
    plan = PromptPlan(prompt.name, prompt, None, SIZES, None, f"{key}:{seed}", cells)  # type: ignore[arg-type]
    plan.look = None if upto is None or upto == power.trials else 1
    result = summarize(plan, "simulated", RunOutcome(calls=trials * len(cells)), power)
    result.seed, result.pool_key = seed, key
    return result


def through_compare(
    d: Draws, pr: int, settings: RecallSettings, power: RecallPower, stop_at: dict[str, int], design: Design
) -> bool:
    """Blocked, by the full path: the runs as results files, history pooled, compare, exit code."""
    rules = {"stop_on_drop": design.block, "stop_on_no_change": design.pass_early}
    prompt = _prompt_config(settings.model_copy(update=rules))
    base_prs, head_prs = [], []
    for p in range(d.head.shape[1]):
        name = f"p{p}"
        base = run_result(d.base[pr, p], prompt, power, seed=0, key=f"base{p}")
        earlier = [
            run_result(d.history[pr, p, r], prompt, power, seed=r + 1, key=f"base{p}")
            for r in range(HISTORY_RUNS)
        ]
        base.history = pool_history(base, earlier)
        head = run_result(d.head[pr, p], prompt, power, seed=0, key=f"head{p}", upto=stop_at.get(name))
        base_prs.append(PromptResult(name=name, template="prompts/rag.j2", model=base.model, recall=base))
        head_prs.append(PromptResult(name=name, template="prompts/rag.j2", model=head.model, recall=head))
    comparison = compare(
        Results(config="needle.toml", prompts=base_prs), Results(config="needle.toml", prompts=head_prs)
    )
    return comparison_exit_code(comparison) == EXIT_CHECKS_FAILED


def clopper_upper(k: int, n: int, conf: float = 0.95) -> float:
    if k >= n:
        return 1.0
    lo, hi = k / n, 1.0
    for _ in range(50):  # bisection on P(X <= k | p) = 1 - conf
        mid = (lo + hi) / 2
        tail = sum(math.comb(n, i) * mid**i * (1 - mid) ** (n - i) for i in range(k + 1))
        lo, hi = (mid, hi) if tail > 1 - conf else (lo, mid)
    return hi


# a list of counters like providers/local/provider.py's LocalStats: alike in form only (`duplicates` pairs
# them), one is a benchmark row's tally, the other the embedded model's work
@dataclass
class Tally:
    """What one row's pull requests came to."""

    prs: int = 0
    blocked: int = 0
    fixed_blocked: int = 0
    pooled_blocked: int = 0
    """Pull requests blocked by the sequential design, the fixed design and the old pooled test."""
    head_calls: int = 0
    fixed_calls: int = 0
    """The head calls the sequential and the fixed design spent."""
    checked: int = 0
    disagreements: int = 0
    """Pull requests also sent through results -> compare -> exit code, and how many disagreed."""
    seconds: float = 0.0

    def upper(self, k: int | None = None) -> float:
        """One-sided 95% upper bound on the block rate (exact, Clopper-Pearson)."""
        return clopper_upper(self.blocked if k is None else k, self.prs)


def replay(
    scenario: Scenario,
    prs: int,
    seed: int,
    settings: RecallSettings | None = None,
    *,
    design: Design = SEQUENTIAL,
    seed_sd: float = 0.0,
    check: int = CHECK_PRS,
) -> Tally:
    """PRS pull requests of SCENARIO: the sequential DESIGN, the fixed design, the old pooled test."""
    settings = settings or RecallSettings(sizes=SIZES, depths=DEPTHS)
    power = default_plan(settings)
    rng = np.random.default_rng(seed)
    d = draw(rng, scenario, prs, power.trials, seed_sd)
    tally = Tally()
    started = time.perf_counter()
    for pr in range(prs):
        blocked, calls = decide(d, pr, design, settings)
        fixed, fixed_calls = decide(d, pr, FIXED, settings)
        tally.prs += 1
        tally.blocked += blocked
        tally.fixed_blocked += fixed
        tally.head_calls += calls
        tally.fixed_calls += fixed_calls
        if not scenario.must_block:  # the old test's power is not in question, its error rate is
            tally.pooled_blocked += pooled_test_blocks(d, pr, settings)
        if pr < check:
            datas = [prompt_data(d, pr, p, design, settings) for p in range(scenario.prompts)]
            stop_at = {n: x.trials for n, x in sequential_replay(datas, settings.alpha).items()}
            tally.checked += 1
            tally.disagreements += through_compare(d, pr, settings, power, stop_at, design) != blocked
    tally.seconds = time.perf_counter() - started
    return tally


def _pct(x: float) -> str:
    return f"{x * 100:.1f}%"


def table(rows: list[tuple[Scenario, float, Tally]]) -> str:
    lines = [
        "| scenario (base → head) | seed sd | PRs | blocked, sequential (95% upper) | blocked, fixed | "
        "blocked, old pooled test | head calls, sequential / fixed | compare path agrees |",
        "|---|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for sc, sd, t in rows:
        upper = f" ({_pct(t.upper())})" if not sc.must_block else ""
        lines.append(
            f"| {sc.name} | {sd:g} | {t.prs:,} | **{_pct(t.blocked / t.prs)}**{upper} | "
            f"{_pct(t.fixed_blocked / t.prs)} | {'–' if sc.must_block else _pct(t.pooled_blocked / t.prs)} | "
            f"{t.head_calls / t.prs:.0f} / {t.fixed_calls / t.prs:.0f} ({t.head_calls / t.fixed_calls:.0%}) | "
            f"{t.checked - t.disagreements}/{t.checked} |"
        )
    return "\n".join(lines)


def write_docs(text: str, begin: str = BEGIN, end: str = END) -> None:
    """TEXT between the markers BEGIN and END of docs/benchmarks.md (appended when they are not there)."""
    doc = DOCS.read_text(encoding="utf-8")
    if begin in doc and end in doc:
        head, rest = doc.split(begin, 1)
        _, tail = rest.split(end, 1)
        doc = f"{head}{begin}\n{text}\n{end}{tail}"
    else:
        doc = doc.rstrip("\n") + f"\n\n{begin}\n{text}\n{end}\n"
    DOCS.write_text(doc, encoding="utf-8")


def _prs_note(prs: int, null_prs: int | None) -> str:
    if not null_prs or null_prs == prs:
        return f"{prs:,} PRs per row"
    return f"{null_prs:,} PRs per single-prompt no-change row, {prs:,} on the others"


def rows_to_run() -> list[tuple[Scenario, float]]:
    nulls = [(sc, sd) for sc in [*NULLS, FOUR] for sd in SEED_SDS]
    return nulls + [(sc, 0.3) for sc in DROPS]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prs", type=int, default=2000, help="pull requests per scenario")
    parser.add_argument(
        "--null-prs",
        type=int,
        help="pull requests per single-prompt no-change row (default: --prs); the false-block goal is "
        "an upper bound, which more PRs tighten",
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--no-docs", action="store_true", help="print only")
    parser.add_argument(
        "--rows", help="only these rows (comma-separated indices: split a sweep over processes)"
    )
    args = parser.parse_args(argv)
    wanted = {int(i) for i in args.rows.split(",")} if args.rows else None
    settings = RecallSettings(sizes=SIZES, depths=DEPTHS)
    plan = default_plan(settings)
    started = time.perf_counter()
    rows = []
    for i, (sc, sd) in enumerate(rows_to_run()):
        if wanted is not None and i not in wanted:
            continue
        prs = args.null_prs if args.null_prs and sc in NULLS else args.prs
        t = replay(sc, prs, args.seed + i, settings, seed_sd=sd)
        rows.append((sc, sd, t))
        print(
            f"{sc.name} sd {sd}: {t.blocked}/{t.prs} (fixed {t.fixed_blocked}), {t.seconds:.0f} s",
            file=sys.stderr,
        )
    seconds = time.perf_counter() - started
    looks = SEQUENTIAL.looks(plan.trials)
    levels = ", ".join(f"{x:.4g}" for x in SEQUENTIAL.levels(plan.trials, settings.alpha))
    text = (
        f"Defaults: threshold {settings.threshold}, family alpha {settings.alpha}, min_drop {settings.min_drop}, "
        f'trials "auto" = **{plan.trials} per cell**, sizes {SIZES} x depths {DEPTHS}; looks after {list(looks)} '
        f"trials per cell at alpha {levels} (looks before the last test the middle group only; pass when "
        f"every group's chance to be flagged at the last look, on its trend, is below {FUTILITY:g}); "
        f"{HISTORY_RUNS} history runs pooled into every base (the old "
        f"pooled test uses them, the new test keeps them out); trial effect sd {TRIAL_SD}. "
        f"{_prs_note(args.prs, args.null_prs)}, seed {args.seed}, {sum(t.prs for *_, t in rows):,} PRs replayed in "
        f"{seconds:.0f} s.\n\n" + table(rows)
    )
    print(text)
    if not args.no_docs:
        write_docs(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
