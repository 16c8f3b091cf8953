"""``recall.reorder_ab``: the reorder fix measured on the user's own prompt.

The diagnosis of a prompt lost in the middle advises dealing retrieved chunks with
:func:`needle_action.runtime.edge_order` (best first and last, weakest in the middle). With
``reorder_ab = true`` and a list slot, the run measures that advice: the middle depths' cells (depth
strictly between 0 and 1) are run a second time with the same needles, the same filler and the same
trials, but with the slot's items, taken in placement order as a retriever's ranking, dealt by
``edge_order``. The B arm is one more plan in the same scheduler (same queue, same limit, same
caps); its answers never enter the cells, groups or verdicts: it is advice, measured.
"""

from __future__ import annotations

from needle_action.recall.run.cells import CellRun
from needle_action.recall.run.scheduler import PromptPlan
from needle_action.recall.trials.haystack import HaystackBuilder
from needle_action.request.ordering import edge_order
from needle_action.results import RecallResult, ReorderDepth

B_ARM = ":edge_order"  # suffix of the B arm's settings hash (batch custom ids stay distinct)


def edge_order_plan(plan: PromptPlan) -> PromptPlan | None:
    """PLAN's B arm: its middle-depth cells again with the context dealt by edge_order, or None
    when the prompt does not ask for it, its slot is one string, or it has no middle depth."""
    if not plan.prompt.recall.reorder_ab or not plan.builder.list_slot:
        return None
    cells = [CellRun(c.size, c.depth, c.planned, style=c.style) for c in plan.cells if 0 < c.depth < 1]
    if not cells:
        return None
    b = plan.builder
    builder = HaystackBuilder(
        b.config, b.prompt, b.counter, seed=b.seed, fixture_path=b.fixture_path, deal=edge_order
    )
    # the same name: the scheduler draws each trial's needle from (seed, name, cell, trial), so the B
    # arm asks exactly the A arm's needles and the two arms are paired trial by trial
    return PromptPlan(
        plan.name,
        plan.prompt,
        plan.fixture,
        plan.sizes,
        builder,
        plan.settings_hash + B_ARM,
        cells,
        provider=plan.provider,
        batch=plan.batch,
    )


def _pooled(cells: list[tuple[str, float, int, int]], style: str, depth: float) -> tuple[int, int]:
    picked = [(h, n) for s, d, h, n in cells if s == style and abs(d - depth) < 1e-9]
    return sum(h for h, _ in picked), sum(n for _, n in picked)


def _rate(hits: int, trials: int) -> float | None:
    return hits / trials if trials else None


def add_arm(result: RecallResult, arm: PromptPlan) -> None:
    """RESULT (the A arm's summary) gains the B arm's rates per style x middle depth, pooled over the
    sizes, and its calls and cost (they were spent on this prompt)."""
    a = [(c.style, c.depth, c.hits, c.trials) for c in result.cells]
    b = [(c.style, c.depth, c.hits, c.done) for c in arm.cells]
    rows = []
    for style, depth in dict.fromkeys((s, d) for s, d, _, _ in b):
        hits, trials = _pooled(a, style, depth)
        edge_hits, edge_trials = _pooled(b, style, depth)
        rows.append(
            ReorderDepth(
                style=style,
                depth=depth,
                hits=hits,
                trials=trials,
                rate=_rate(hits, trials),
                edge_hits=edge_hits,
                edge_trials=edge_trials,
                edge_rate=_rate(edge_hits, edge_trials),
            )
        )
    result.reorder_ab = rows
    result.calls += arm.outcome.calls
    result.speculative_calls += arm.outcome.speculative_calls
    result.cost_usd = round(result.cost_usd + arm.outcome.cost_usd, 6)
