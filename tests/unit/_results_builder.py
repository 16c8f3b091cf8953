"""Hand-built Results for compare/render tests (no pipeline needed)."""

from __future__ import annotations

from typing import Any

from needle_action.results import (
    AssembledView,
    BudgetCase,
    Diagnosis,
    PromptResult,
    RecallAnswer,
    RecallCell,
    RecallDiagnosis,
    RecallResult,
    Results,
    SkipKind,
    TokenCount,
)


def case(
    tokens: int,
    *,
    fixture: str | None = "fx/a.yaml",
    max_input: int | None = 8000,
    reserve: int = 500,
    growth: Any = "10%",  # a max_growth as written in needle.toml: "10%", "+500" ...
    h: str | None = None,
    view: str | None = None,
    sections: dict[str, int] | None = None,
) -> BudgetCase:
    """A budget case; VIEW stores an assembled view (its hash becomes the content hash), SECTIONS
    the per-section token counts (stubbed on a subclass when the results model has no such field)."""
    headroom = None if max_input is None else max_input - tokens - reserve
    assembled = None
    if view is not None:
        assembled = AssembledView.of(view)
        h = h or assembled.sha256
    kind = BudgetCase if sections is None or "sections" in BudgetCase.model_fields else _SectionedCase
    extra: dict[str, Any] = {"sections": sections} if sections is not None else {}
    return kind(
        assembled=assembled,
        **extra,
        fixture=fixture,
        content_hash=h or f"hash-{fixture}-{tokens}",
        count=TokenCount(tokens=tokens, raw_tokens=tokens, counter="tiktoken:o200k_base", exact=True),
        max_input_tokens=max_input,
        reserve_output_tokens=reserve,
        headroom=headroom,
        max_growth=growth,
        status="fail" if headroom is not None and headroom < 0 else "pass",
    )


class _SectionedCase(BudgetCase):
    sections: dict[str, int] | None = None


def cell(
    size: int,
    depth: float,
    hits: int,
    trials: int,
    *,
    threshold: float = 0.8,
    answers=(),
    planned: int | None = None,
    stopped: bool = False,
) -> RecallCell:
    rate = hits / trials if trials else None
    return RecallCell(
        size=size,
        depth=depth,
        hits=hits,
        trials=trials,
        planned_trials=planned or trials,
        rate=rate,
        ci_low=0.0,
        ci_high=1.0,
        status="pass" if rate is not None and rate >= threshold else "fail",
        stopped_early=stopped and trials < (planned or trials),
        answers=[RecallAnswer(trial=i, needle=n, answer=a, hit=False) for i, (n, a) in enumerate(answers)],
    )


def recall(
    grid: dict[tuple[int, float], tuple[int, int]],
    *,
    model: str = "claude-sonnet-5-5",
    threshold: float = 0.8,
    alpha: float = 0.01,
    min_drop: float = 0.2,
    kind: Diagnosis = "all-pass",
    answers: dict | None = None,
    calls: int = 0,
    planned: int | None = None,
    stopped: bool = False,
    full: bool = True,
    partial: bool = False,
    pool_key: str | None = None,
    status: str | None = None,
) -> RecallResult:
    cells = [
        cell(
            s,
            d,
            h,
            n,
            threshold=threshold,
            answers=(answers or {}).get((s, d), ()),
            planned=planned,
            stopped=stopped,
        )
        for (s, d), (h, n) in sorted(grid.items())
    ]
    return RecallResult(
        provider="anthropic",
        model=model,
        fixture="fx/a.yaml",
        needle_style="codeword",
        scoring="strict",
        threshold=threshold,
        seed=0,
        alpha=alpha,
        min_drop=min_drop,
        settings_hash="s" + str(sorted(grid.items())),
        pool_key=pool_key or "p" + str(sorted(grid.items())),
        cells=cells,
        effective_context=max(s for s, _ in grid),
        diagnosis=RecallDiagnosis(
            kind=kind,
            summary=f"summary of {kind}",
            fix="Move key content to the edges and the question last.",
        ),
        calls=calls,
        partial=partial,
        partial_reason="max_calls (40) reached" if partial else None,
        full_trials=full,
        status=status or ("partial" if partial else "pass"),  # type: ignore[arg-type]
    )


def prompt(
    name: str,
    cases,
    *,
    template: str | None = None,
    rec: RecallResult | None = None,
    skipped: str | None = None,
    skip_kind: SkipKind | None = None,
    line: int = 12,
) -> PromptResult:
    return PromptResult(
        name=name,
        template=template or f"prompts/{name}.j2",
        template_line=line,
        model="claude-sonnet-5-5",
        cases=list(cases),
        recall=rec,
        recall_skipped=skipped,
        recall_skip_kind=skip_kind or (SkipKind.NO_KEY if skipped else None),
    )


def results(*prompts: PromptResult, commit: str = "a" * 40) -> Results:
    return Results(config="needle.toml", commit=commit, prompts=list(prompts))


def grid(rate_by_depth: dict[float, tuple[int, int]], sizes=(2000, 8000)) -> dict:
    return {(s, d): hn for s in sizes for d, hn in rate_by_depth.items()}
