"""Base vs head: what changed, and is it bad enough to block the pull request?

Input: two :class:`~needle_action.results.Results` (the base may be missing: first run, no
threshold file on the base branch, base could not be checked out). Output: a :class:`Comparison`
that the report renders and the action turns into an exit code.

Verdict rules (tolerances come from the threshold file):

* tokens: a case fails when tokens + output reserve exceed ``max_input_tokens`` (absolute budget)
  or when growth against the base case exceeds ``max_growth``;
* recall, per cell (size x depth) present on both sides: a **regression** needs both a
  one-sided Fisher exact p-value below ``recall.alpha`` (the drop is unlikely to be noise) and a
  rate drop of at least ``recall.min_drop`` (the drop matters). A drop that the trial counts could
  never prove significant, however extreme, is **inconclusive** instead of guessed either way;
* a head cell with no base counterpart is judged against the absolute threshold only.

Policy (fail on budget / on recall regression / on provider outage) is applied by the action; this
module only reports the flags separately.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from needle_action.budget import judge
from needle_action.recall.stats import fisher_drop_pvalue
from needle_action.results import BudgetCase, PromptResult, RecallCell, RecallResult, Results, SkipKind

PromptStatus = Literal["new", "deleted", "renamed", "changed", "unchanged"]
Tier = Literal["green", "yellow", "red"]
CellVerdict = Literal[
    "ok", "regressed", "improved", "inconclusive", "below-threshold", "new", "removed", "not-run"
]
Verdict = Literal["pass", "fail-budget", "fail-recall", "fail", "inconclusive"]
FailureKind = Literal["budget", "growth", "recall-regression", "recall-threshold", "error"]

# the "yellow" tier: more than this share of the growth allowance used, or less headroom than this
YELLOW_GROWTH_SHARE = 0.5
YELLOW_HEADROOM_SHARE = 0.10


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


def min_achievable_pvalue(base_n: int, head_n: int) -> float:
    """The smallest one-sided p-value these trial counts can ever produce (base all hits, head none)."""
    if base_n <= 0 or head_n <= 0:
        return 1.0
    return fisher_drop_pvalue(base_n, base_n, 0, head_n)


# --------------------------------------------------------------------------- models


class TokenDelta(_Model):
    """One prompt x fixture, base -> head."""

    fixture: str | None
    base_tokens: int | None
    head_tokens: int | None
    delta: int | None = None
    percent: float | None = None
    counter: str | None = None
    exact: bool | None = None
    max_input_tokens: int | None = None
    reserve_output_tokens: int = 0
    headroom: int | None = None
    max_growth: str | None = None
    growth_allowed: float | None = Field(default=None, description="allowed growth in tokens vs base")
    budget_ok: bool = True
    growth_ok: bool = True
    tier: Tier = "green"
    reasons: list[str] = Field(default_factory=list)


class CellDelta(_Model):
    size: int
    depth: float
    base_hits: int | None = None
    base_trials: int | None = None
    base_rate: float | None = None
    head_hits: int | None = None
    head_trials: int | None = None
    head_rate: float | None = None
    head_ci_low: float | None = None
    head_ci_high: float | None = None
    head_status: str | None = None
    base_status: str | None = None
    drop: float | None = None
    p_value: float | None = None
    verdict: CellVerdict
    token_offset: int | None = None


class AnswerSample(_Model):
    """A wrong answer shown in the details (raw text; the renderer sanitises it)."""

    size: int
    depth: float
    expected: str
    answer: str


class RecallSide(_Model):
    provider: str
    model: str
    threshold: float
    diagnosis: str
    summary: str
    fix: str
    effective_context: int | None
    calls: int
    cached_calls: int
    cost_usd: float
    partial: bool
    partial_reason: str | None = None


class RecallComparison(_Model):
    status: Literal["pass", "fail", "inconclusive", "skipped"]
    skipped_reason: str | None = None
    threshold: float | None = None
    alpha: float | None = None
    min_drop: float | None = None
    sizes: list[int] = Field(default_factory=list)
    depths: list[float] = Field(default_factory=list)
    cells: list[CellDelta] = Field(default_factory=list)
    base: RecallSide | None = None
    head: RecallSide | None = None
    comparable: bool = Field(default=True, description="false when base used other sizes/depths/model")
    samples: list[AnswerSample] = Field(default_factory=list)

    def cell(self, size: int, depth: float) -> CellDelta | None:
        return next((c for c in self.cells if c.size == size and abs(c.depth - depth) < 1e-9), None)


class PromptComparison(_Model):
    name: str
    status: PromptStatus
    renamed_from: str | None = None
    template: str
    base_template: str | None = None
    template_line: int | None = None
    model: str | None = None
    tokens: list[TokenDelta] = Field(default_factory=list)
    recall: RecallComparison | None = None
    error: str | None = None


class Failure(_Model):
    """A reason the check fails, located on the template for a ``::error file=,line=::`` annotation.

    ``file`` is the template (relative to the threshold file's folder); ``line`` a line in it when
    known (the action fills in the first line the pull request changed); ``config_line`` is the
    ``[prompts.NAME]`` line in the threshold file.
    """

    kind: FailureKind
    prompt: str
    title: str
    message: str
    file: str | None = None
    line: int | None = None
    config_line: int | None = None


class SideTotals(_Model):
    calls: int = 0
    cached_calls: int = 0
    saved_calls: int = 0
    cost_usd: float = 0.0
    seconds: float = 0.0
    partial: bool = False


class Comparison(_Model):
    verdict: Verdict
    headline: str
    has_base: bool
    base_commit: str | None = None
    head_commit: str | None = None
    budget_failed: bool = False
    recall_regressed: bool = Field(
        default=False, description="a significant drop vs base, or a new cell below threshold"
    )
    recall_inconclusive: bool = False
    provider_outage: bool = False
    errors: bool = False
    prompts: list[PromptComparison] = Field(default_factory=list)
    failures: list[Failure] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
    head_totals: SideTotals = Field(default_factory=SideTotals)
    base_totals: SideTotals | None = None

    @property
    def failed(self) -> bool:
        """Default policy (everything on): budget failures, recall regressions and errors fail."""
        return self.budget_failed or self.recall_regressed or self.errors

    def failed_under(self, *, fail_on_budget: bool, fail_on_recall_regression: bool) -> bool:
        return (
            self.errors
            or (fail_on_budget and self.budget_failed)
            or (fail_on_recall_regression and self.recall_regressed)
        )

    def prompt(self, name: str) -> PromptComparison | None:
        return next((p for p in self.prompts if p.name == name), None)


# --------------------------------------------------------------------------- tokens


def _tier(t: TokenDelta) -> Tier:
    if not (t.budget_ok and t.growth_ok):
        return "red"
    if t.growth_allowed is not None and t.delta is not None and t.delta > 0:
        if t.growth_allowed == 0 or t.delta > YELLOW_GROWTH_SHARE * t.growth_allowed:
            return "yellow"
    if t.headroom is not None and t.max_input_tokens:
        if t.headroom < YELLOW_HEADROOM_SHARE * t.max_input_tokens:
            return "yellow"
    return "green"


def _token_delta(head: BudgetCase | None, base: BudgetCase | None) -> TokenDelta:
    if head is None:
        assert base is not None
        return TokenDelta(
            fixture=base.fixture,
            base_tokens=base.count.tokens,
            head_tokens=None,
            counter=base.count.counter,
            exact=base.count.exact,
        )
    j = judge(
        head.count.tokens,
        reserve=head.reserve_output_tokens,
        max_input_tokens=head.max_input_tokens,
        max_growth=head.max_growth,
        base_tokens=base.count.tokens if base else None,
    )
    t = TokenDelta(
        fixture=head.fixture,
        base_tokens=base.count.tokens if base else None,
        head_tokens=head.count.tokens,
        counter=head.count.counter,
        exact=head.count.exact,
        max_input_tokens=head.max_input_tokens,
        reserve_output_tokens=head.reserve_output_tokens,
        headroom=j.headroom,
        max_growth=str(head.max_growth) if head.max_growth is not None else None,
        delta=j.growth_tokens,
        percent=j.growth_percent,
        growth_allowed=round(j.growth_allowed, 2) if j.growth_allowed is not None else None,
        budget_ok=not j.over_budget,
        growth_ok=not j.over_growth,
    )
    t.reasons = [r for r in (_budget_reason(t), _growth_reason(t)) if r]
    t.tier = _tier(t)
    return t


def _budget_reason(t: TokenDelta) -> str | None:
    if t.budget_ok or t.headroom is None:
        return None
    return (
        f"{t.head_tokens} tokens + {t.reserve_output_tokens} reserved for output exceed "
        f"max_input_tokens {t.max_input_tokens} by {-t.headroom}"
    )


def _growth_reason(t: TokenDelta) -> str | None:
    if t.growth_ok or t.growth_allowed is None:
        return None
    pct = f" (+{t.percent:g}%)" if t.percent is not None else ""
    return (
        f"grew by {t.delta} tokens{pct} vs base, more than max_growth {t.max_growth} "
        f"(= {t.growth_allowed:g} tokens)"
    )


# --------------------------------------------------------------------------- recall


def _side(r: RecallResult) -> RecallSide:
    return RecallSide(
        provider=r.provider,
        model=r.model,
        threshold=r.threshold,
        diagnosis=r.diagnosis.kind,
        summary=r.diagnosis.summary,
        fix=r.diagnosis.fix,
        effective_context=r.effective_context,
        calls=r.calls,
        cached_calls=r.cached_calls,
        cost_usd=r.cost_usd,
        partial=r.partial,
        partial_reason=r.partial_reason,
    )


def _cell_key(c: RecallCell) -> tuple[int, float]:
    return (c.size, round(c.depth, 6))


def _judge_cell(
    head: RecallCell | None, base: RecallCell | None, *, threshold: float, alpha: float, min_drop: float
) -> CellDelta:
    ref = head or base
    assert ref is not None
    d = CellDelta(size=ref.size, depth=ref.depth, verdict="not-run")
    if base is not None:
        d.base_hits, d.base_trials, d.base_rate, d.base_status = (
            base.hits,
            base.trials,
            base.rate,
            base.status,
        )
    if head is not None:
        d.head_hits, d.head_trials, d.head_rate = head.hits, head.trials, head.rate
        d.head_ci_low, d.head_ci_high, d.head_status = head.ci_low, head.ci_high, head.status
        d.token_offset = head.token_offset
    if head is None:
        d.verdict = "removed"
        return d
    if head.trials == 0:
        d.verdict = "not-run"
        return d
    if base is None or base.trials == 0:
        d.verdict = (
            "below-threshold"
            if head.status == "fail"
            else ("inconclusive" if head.status == "undecided" else "new")
        )
        return d
    base_rate, head_rate = base.hits / base.trials, head.hits / head.trials
    d.drop = round(base_rate - head_rate, 4)
    d.p_value = fisher_drop_pvalue(base.hits, base.trials, head.hits, head.trials)
    if d.drop >= min_drop and d.drop > 0:
        powerless = min_achievable_pvalue(base.trials, head.trials) >= alpha
        stopped = base.trials < base.planned_trials or head.trials < head.planned_trials
        if d.p_value < alpha:
            d.verdict = "regressed"
        elif head.status != "pass" and (powerless or stopped):
            # the cell fell below the threshold but there are too few trials to call it: no outcome at
            # these counts could be significant, or early stopping ended the cell before it could be
            d.verdict = "inconclusive"
        else:
            d.verdict = "ok"  # a drop this size is within noise at these counts
    elif -d.drop >= min_drop and fisher_drop_pvalue(head.hits, head.trials, base.hits, base.trials) < alpha:
        d.verdict = "improved"
    else:
        d.verdict = "ok"
    return d


def _compare_recall(head: PromptResult, base: PromptResult | None) -> RecallComparison | None:
    hr = head.recall
    br = base.recall if base is not None else None
    if hr is None:
        if head.recall_skipped:
            return RecallComparison(
                status="skipped", skipped_reason=head.recall_skipped, base=_side(br) if br else None
            )
        return None
    rc = RecallComparison(
        status="pass", threshold=hr.threshold, head=_side(hr), base=_side(br) if br else None
    )
    settings = _recall_tolerances(hr)
    rc.alpha, rc.min_drop = settings
    head_cells = {_cell_key(c): c for c in hr.cells}
    base_cells = {_cell_key(c): c for c in br.cells} if br else {}
    if br is not None and (
        br.model != hr.model or br.needle_style != hr.needle_style or br.scoring != hr.scoring
    ):
        rc.comparable = False  # other model or needles: rates are not the same quantity; judge head alone
        base_cells_for_test: dict = {}
    else:
        base_cells_for_test = base_cells
    keys = sorted(set(head_cells) | set(base_cells))
    rc.sizes = sorted({k[0] for k in keys})
    rc.depths = sorted({k[1] for k in keys})
    for key in keys:
        rc.cells.append(
            _judge_cell(
                head_cells.get(key),
                base_cells_for_test.get(key),
                threshold=hr.threshold,
                alpha=rc.alpha,
                min_drop=rc.min_drop,
            )
        )
        if key in base_cells and key not in base_cells_for_test and rc.cells[-1].verdict != "removed":
            b = base_cells[key]  # keep the base numbers visible even when not tested
            rc.cells[-1].base_hits, rc.cells[-1].base_trials, rc.cells[-1].base_rate = (
                b.hits,
                b.trials,
                b.rate,
            )
    verdicts = {c.verdict for c in rc.cells}
    if verdicts & {"regressed", "below-threshold"}:
        rc.status = "fail"
    elif "inconclusive" in verdicts or hr.partial:
        rc.status = "inconclusive"
    for c in hr.cells:
        for a in c.answers:
            if not a.hit and len(rc.samples) < 12:
                rc.samples.append(
                    AnswerSample(size=c.size, depth=c.depth, expected=a.needle, answer=a.answer)
                )
    return rc


def _recall_tolerances(r: RecallResult) -> tuple[float, float]:
    """alpha and min_drop of the head run (the threshold file's RecallSettings, recorded in the result)."""
    return float(r.alpha), float(r.min_drop)


# --------------------------------------------------------------------------- prompts


def _case_hashes(p: PromptResult) -> set[str]:
    return {c.content_hash for c in p.cases}


def _match_renames(base: Results, head: Results) -> dict[str, str]:
    """head name -> base name for prompts renamed in the threshold file.

    A rename is a head prompt with no base prompt of that name whose assembled content (any case)
    or template path equals a base prompt that disappeared.
    """
    head_names = {p.name for p in head.prompts}
    gone = [p for p in base.prompts if p.name not in head_names]
    base_names = {p.name for p in base.prompts}
    out: dict[str, str] = {}
    for hp in head.prompts:
        if hp.name in base_names:
            continue
        for bp in gone:
            if bp.name in out.values():
                continue
            if (_case_hashes(hp) & _case_hashes(bp)) or hp.template == bp.template:
                out[hp.name] = bp.name
                break
    return out


def _compare_prompt(
    head: PromptResult, base: PromptResult | None, renamed_from: str | None
) -> PromptComparison:
    if base is None:
        status: PromptStatus = "new"
    elif renamed_from:
        status = "renamed"
    elif _case_hashes(head) == _case_hashes(base) and head.template == base.template:
        status = "unchanged"
    else:
        status = "changed"
    pc = PromptComparison(
        name=head.name,
        status=status,
        renamed_from=renamed_from,
        template=head.template,
        base_template=base.template if base else None,
        template_line=head.template_line,
        model=head.model,
        error=head.error,
    )
    base_cases = {c.fixture: c for c in base.cases} if base else {}
    seen: set = set()
    for hc in head.cases:
        bc = base_cases.get(hc.fixture)
        seen.add(hc.fixture)
        pc.tokens.append(_token_delta(hc, bc))
    for fx, bc in base_cases.items():
        if fx not in seen:
            pc.tokens.append(_token_delta(None, bc))
    pc.recall = _compare_recall(head, base)
    return pc


def _failures_of(pc: PromptComparison) -> list[Failure]:
    out: list[Failure] = []
    loc = {"prompt": pc.name, "file": pc.template, "line": 1, "config_line": pc.template_line}
    if pc.error:
        out.append(
            Failure(kind="error", title=f"needle: {pc.name} could not be measured", message=pc.error, **loc)
        )
    for t in pc.tokens:
        where = f" [{t.fixture}]" if t.fixture else ""
        if not t.budget_ok:
            out.append(
                Failure(
                    kind="budget",
                    title=f"needle: {pc.name} over token budget",
                    message=f"{pc.name}{where}: {_budget_reason(t)}",
                    **loc,
                )
            )
        if not t.growth_ok:
            out.append(
                Failure(
                    kind="growth",
                    title=f"needle: {pc.name} grew beyond max_growth",
                    message=f"{pc.name}{where}: {_growth_reason(t)}",
                    **loc,
                )
            )
    rc = pc.recall
    if rc is not None:
        for c in rc.cells:
            if c.verdict == "regressed":
                out.append(
                    Failure(
                        kind="recall-regression",
                        title=f"needle: {pc.name} recall regressed",
                        message=(
                            f"{pc.name}: recall at {c.size} tokens, depth {c.depth:g} fell from "
                            f"{c.base_hits}/{c.base_trials} to {c.head_hits}/{c.head_trials} "
                            f"(one-sided Fisher p={c.p_value:.3g} < alpha {rc.alpha:g})"
                        ),
                        **loc,
                    )
                )
            elif c.verdict == "below-threshold":
                out.append(
                    Failure(
                        kind="recall-threshold",
                        title=f"needle: {pc.name} recall below threshold",
                        message=(
                            f"{pc.name}: recall at {c.size} tokens, depth {c.depth:g} is "
                            f"{c.head_hits}/{c.head_trials}, below the threshold {rc.threshold:g} "
                            "(no base result to compare with)"
                        ),
                        **loc,
                    )
                )
    return out


def _totals(r: Results) -> SideTotals:
    t = r.totals
    return SideTotals(
        calls=t.calls,
        cached_calls=t.cached_calls,
        saved_calls=t.saved_calls,
        cost_usd=t.cost_usd,
        seconds=t.seconds,
        partial=t.partial,
    )


def _is_outage(p: PromptResult) -> bool:
    # a partial run cut short by the provider also sets results.totals.provider_unavailable
    return p.recall_skip_kind == SkipKind.PROVIDER_UNAVAILABLE


def compare(base: Results | None, head: Results, *, provider_outage: bool | None = None) -> Comparison:
    """Compare HEAD with BASE (None: no baseline, every prompt is new)."""
    renames = _match_renames(base, head) if base is not None else {}
    prompts: list[PromptComparison] = []
    for hp in head.prompts:
        base_name = renames.get(hp.name, hp.name)
        bp = base.prompt(base_name) if base is not None else None
        prompts.append(_compare_prompt(hp, bp, renames.get(hp.name)))
    if base is not None:
        head_names = {p.name for p in head.prompts}
        for bp in base.prompts:
            if bp.name in head_names or bp.name in renames.values():
                continue
            prompts.append(
                PromptComparison(
                    name=bp.name,
                    status="deleted",
                    template=bp.template,
                    base_template=bp.template,
                    template_line=None,
                    model=bp.model,
                    tokens=[_token_delta(None, c) for c in bp.cases],
                )
            )
    failures = [f for pc in prompts for f in _failures_of(pc)]
    if provider_outage is None:
        provider_outage = bool(getattr(head.totals, "provider_unavailable", False)) or any(
            _is_outage(p) for p in head.prompts
        )
    outage = provider_outage
    comp = Comparison(
        verdict="pass",
        headline="",
        has_base=base is not None,
        base_commit=base.commit if base else None,
        head_commit=head.commit,
        budget_failed=any(f.kind in ("budget", "growth") for f in failures),
        recall_regressed=any(f.kind in ("recall-regression", "recall-threshold") for f in failures),
        recall_inconclusive=any(p.recall is not None and p.recall.status == "inconclusive" for p in prompts),
        provider_outage=outage,
        errors=any(f.kind == "error" for f in failures),
        prompts=prompts,
        failures=failures,
        head_totals=_totals(head),
        base_totals=_totals(base) if base else None,
    )
    if base is None:
        comp.notes.append(
            "No base results: every prompt is judged on its own (absolute budgets and thresholds)."
        )
    if outage:
        comp.notes.append(
            "The model provider was unavailable: recall could not be measured for some prompts."
        )
    comp.verdict, comp.headline = _headline(comp)
    return comp


def _headline(c: Comparison) -> tuple[Verdict, str]:
    if c.errors:
        return "fail", "❌ Some prompts could not be measured"
    if c.budget_failed and c.recall_regressed:
        return "fail", "❌ Token budget exceeded and recall regressed"
    if c.budget_failed:
        return "fail-budget", "❌ Token budget exceeded"
    if c.recall_regressed:
        return "fail-recall", "❌ Positional recall regressed"
    if c.recall_inconclusive:
        return "inconclusive", "❔ Inconclusive: too few recall trials to tell a regression from noise"
    if c.provider_outage:
        return "inconclusive", "⚠️ Budgets pass; recall could not run (provider unavailable)"
    return "pass", "✅ Prompts within budget, no recall regression"
