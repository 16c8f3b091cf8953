"""Verdict benchmark (and the data behind tests/integration/test_verdicts_replay.py): replay the real
decision functions of needle on draws from known recall curves, thousands of pull requests in
seconds, and measure how often they are right.

What is real: the trial planning (``recall.power.plan_run``), the summary of a run's cells into a
result (``recall.engine.summarize``: pooled diagnosis, effective context, status), the pooling of
earlier runs (``recall.history.pool_history``), the comparison (``compare.compare``: groups, exact
stratified tests, Holm) and the exit policy (``policy.comparison_exit_code``). What is simulated:
the model. Each trial of a cell is a Bernoulli draw with the curve's probability at that cell; base
and head draw independently (as two runs with different needles do).

The grid and settings are the defaults a new user gets (``RecallSettings()``: threshold 0.8, family
alpha 0.01, min_drop 0.2, trials "auto"), on sizes [2000, 8000, 16000] x depths 0-1 by 0.25.

    python3 bench/verdicts.py [--prs 2000] [--seed 1] [--no-docs]

writes the table between the markers in docs/benchmarks.md (unless --no-docs) and prints it.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from needle_action.compare import compare  # noqa: E402
from needle_action.config.model import PromptConfig, RecallSettings  # noqa: E402
from needle_action.errors import EXIT_CHECKS_FAILED  # noqa: E402
from needle_action.policy import comparison_exit_code  # noqa: E402
from needle_action.recall.engine import summarize  # noqa: E402
from needle_action.recall.groups import planning_group  # noqa: E402
from needle_action.recall.history import pool_history  # noqa: E402
from needle_action.recall.plan import RecallOverrides, effective_prompt  # noqa: E402
from needle_action.recall.power import GroupDesign, group_power, plan_run  # noqa: E402
from needle_action.recall.scheduler import CellRun, PromptPlan, RunOutcome  # noqa: E402
from needle_action.results import PromptResult, RecallPower, RecallResult, Results  # noqa: E402

SIZES = [2000, 8000, 16000]
DEPTHS = [0.0, 0.25, 0.5, 0.75, 1.0]
MIDDLE = (0.25, 0.5, 0.75)
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


def middle_drop(curve: Curve, drop: float) -> Curve:
    """CURVE with DROP taken off at the middle depths (0.25-0.75), at every size."""
    return lambda depth, size: max(0.0, curve(depth, size) - (drop if depth in MIDDLE else 0.0))


@dataclass(frozen=True)
class Scenario:
    name: str
    base: Curve
    head: Curve
    must_block: bool
    diagnosis: str | None = None  # the head's expected diagnosis (null scenarios)
    effective_context: int | None = None  # expected when the diagnosis is size-limited
    history_runs: int = 0  # earlier runs pooled into the base (same curve, other seeds)


NULLS = [
    Scenario("flat .95", flat(0.95), flat(0.95), False, "all-pass"),
    Scenario("flat .8", flat(0.8), flat(0.8), False, "flaky"),
    Scenario("u .95/.2", u_shape(0.95, 0.2), u_shape(0.95, 0.2), False, "lost-in-the-middle"),
    Scenario("u .95/.9", u_shape(0.95, 0.9), u_shape(0.95, 0.9), False, "all-pass"),
    Scenario("cliff at 12K", cliff(12_000), cliff(12_000), False, "size-limited", 8000),
]
DROPS = [
    Scenario("u .95/.9, middle -30 pt", u_shape(0.95, 0.9), middle_drop(u_shape(0.95, 0.9), 0.3), True),
    Scenario("u .95/.9, middle -20 pt", u_shape(0.95, 0.9), middle_drop(u_shape(0.95, 0.9), 0.2), True),
    Scenario("flat .95, middle -30 pt", flat(0.95), middle_drop(flat(0.95), 0.3), True),
    Scenario("flat .95, middle -20 pt", flat(0.95), middle_drop(flat(0.95), 0.2), True),
]
HISTORY = [
    Scenario("u .95/.9 + 3 base runs", u_shape(0.95, 0.9), u_shape(0.95, 0.9), False, history_runs=3),
    Scenario("u .95/.2 + 3 base runs", u_shape(0.95, 0.2), u_shape(0.95, 0.2), False, history_runs=3),
    Scenario(
        "u .95/.9 -20 pt + 3 base runs",
        u_shape(0.95, 0.9),
        middle_drop(u_shape(0.95, 0.9), 0.2),
        True,
        history_runs=3,
    ),
]
SCENARIOS = NULLS + DROPS + HISTORY


def _prompt(settings: RecallSettings) -> PromptConfig:
    """The prompt as a compared run sees it: every planned trial runs (what `needle check` does)."""
    prompt = PromptConfig(name="rag", template="prompts/rag.j2", recall=settings)
    return effective_prompt(prompt, RecallOverrides(full_trials=True))


def run_result(
    rng: np.random.Generator, curve: Curve, prompt: PromptConfig, power: RecallPower, *, seed: int, key: str
) -> RecallResult:
    """One run of the planned trials per cell drawn from CURVE, summarised by the engine's own code."""
    trials = power.trials
    cells = []
    for size in SIZES:
        for depth in DEPTHS:
            hits = int(rng.binomial(trials, curve(depth, size)))
            cells.append(CellRun(size, depth, trials, hits=hits, done=trials, issued=trials, settled=True))
    plan = PromptPlan(prompt.name, prompt, None, SIZES, None, f"{key}:{seed}", cells)  # type: ignore[arg-type]
    result = summarize(plan, "simulated", RunOutcome(calls=trials * len(cells)), power)
    result.seed, result.pool_key = seed, key
    return result


def default_plan(settings: RecallSettings) -> RecallPower:
    """What trials = "auto" plans on the grid with no base known (what a pull request runs)."""
    return plan_run(
        sizes=SIZES,
        depths=DEPTHS,
        trials=settings.trials,
        threshold=settings.threshold,
        alpha=settings.alpha,
        min_drop=settings.min_drop,
    )


def _results(result: RecallResult) -> Results:
    pr = PromptResult(name="rag", template="prompts/rag.j2", model=result.model, recall=result)
    return Results(config="needle.toml", prompts=[pr])


@dataclass
class Tally:
    prs: int = 0
    blocked: int = 0
    underpowered: int = 0
    kinds: Counter = field(default_factory=Counter)
    effective_right: int = 0
    head_calls: int = 0
    base_calls: int = 0
    seconds: float = 0.0


def replay(scenario: Scenario, prs: int, seed: int, settings: RecallSettings | None = None) -> Tally:
    """PRS pull requests of SCENARIO through plan -> summarize -> pool -> compare -> exit code."""
    settings = settings or RecallSettings(sizes=SIZES, depths=DEPTHS)
    prompt = _prompt(settings)
    power = default_plan(settings)
    rng = np.random.default_rng(seed)
    tally = Tally()
    started = time.perf_counter()
    for _ in range(prs):
        base = run_result(rng, scenario.base, prompt, power, seed=0, key="base")
        earlier = [
            run_result(rng, scenario.base, prompt, power, seed=s, key="base")
            for s in range(1, scenario.history_runs + 1)
        ]
        base.history = pool_history(base, earlier)
        head = run_result(rng, scenario.head, prompt, power, seed=0, key="head")
        comparison = compare(_results(base), _results(head))
        tally.prs += 1
        tally.blocked += comparison_exit_code(comparison) == EXIT_CHECKS_FAILED
        tally.underpowered += comparison.verdict in ("underpowered", "inconclusive")
        tally.kinds[head.diagnosis.kind] += 1
        tally.effective_right += head.effective_context == scenario.effective_context
        tally.head_calls += head.calls
        tally.base_calls += 0 if scenario.history_runs else base.calls
    tally.seconds = time.perf_counter() - started
    return tally


def predicted_power(scenario: Scenario, settings: RecallSettings, trials: int) -> float:
    """power.py's exact prediction for the planning group (middle depths, pooled)."""
    group = planning_group(SIZES, DEPTHS)
    base = sum(scenario.base(d, s) for s, d in group.cells) / len(group.cells)
    head = sum(scenario.head(d, s) for s, d in group.cells) / len(group.cells)
    design = GroupDesign(cells=len(group.cells), family_size=9, alpha=settings.alpha)
    base_n = design.cells * trials * (1 + scenario.history_runs)
    return group_power(design, trials=trials, base_rate=base, drop=base - head, base_n=base_n)


def _pct(x: float) -> str:
    return f"{x * 100:.1f}%"


def table(rows: list[tuple[Scenario, Tally]], settings: RecallSettings, trials: int) -> str:
    lines = [
        "| scenario (base → head) | PRs | blocked | underpowered or inconclusive | predicted power | "
        "diagnosis of the head | right | head calls | base calls |",
        "|---|--:|--:|--:|--:|---|--:|--:|--:|",
    ]
    for sc, t in rows:
        predicted = _pct(predicted_power(sc, settings, trials)) if sc.must_block else "–"
        if sc.diagnosis:
            right = t.kinds[sc.diagnosis]
            if sc.effective_context:
                right = min(right, t.effective_right)
            diag = f"{sc.diagnosis}" + (
                f", effective {sc.effective_context:,}" if sc.effective_context else ""
            )
            right_text = _pct(right / t.prs)
        else:
            diag, right_text = ", ".join(f"{k} {v}" for k, v in t.kinds.most_common(2)), "–"
        lines.append(
            f"| {sc.name} | {t.prs:,} | **{_pct(t.blocked / t.prs)}** | {t.underpowered} | {predicted} | {diag} | "
            f"{right_text} | {t.head_calls // t.prs} | {t.base_calls // t.prs} |"
        )
    return "\n".join(lines)


def write_docs(text: str) -> None:
    doc = DOCS.read_text(encoding="utf-8")
    if BEGIN in doc and END in doc:
        head, rest = doc.split(BEGIN, 1)
        _, tail = rest.split(END, 1)
        doc = f"{head}{BEGIN}\n{text}\n{END}{tail}"
    else:
        doc = doc.rstrip("\n") + f"\n\n{BEGIN}\n{text}\n{END}\n"
    DOCS.write_text(doc, encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prs", type=int, default=2000, help="pull requests per scenario")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--no-docs", action="store_true", help="print only")
    args = parser.parse_args(argv)
    settings = RecallSettings(sizes=SIZES, depths=DEPTHS)
    plan = default_plan(settings)
    started = time.perf_counter()
    rows = [(sc, replay(sc, args.prs, args.seed + i)) for i, sc in enumerate(SCENARIOS)]
    seconds = time.perf_counter() - started
    text = (
        f"Defaults: threshold {settings.threshold}, family alpha {settings.alpha}, min_drop "
        f'{settings.min_drop}, trials "auto" = **{plan.trials} per cell** (planned for a base rate of '
        f"{plan.base_rate:.0%} in the {plan.group}: {plan.power:.1%} power for a {settings.min_drop * 100:.0f}-pt "
        f"drop, detects drops >= {plan.detectable_drop * 100 if plan.detectable_drop else 0:.0f} pt), "
        f"sizes {SIZES} x depths {DEPTHS}. {args.prs:,} PRs per row, seed {args.seed}, "
        f"{sum(t.prs for _, t in rows):,} PRs replayed in {seconds:.0f} s.\n\n"
        + table(rows, settings, plan.trials)
    )
    print(text)
    if not args.no_docs:
        write_docs(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
