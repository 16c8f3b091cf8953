"""The comparison's data: what the report renders, the action turns into an exit code, and the
fork pattern's ``post-report`` re-validates. Plain pydantic models, no logic beyond lookups."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from needle_action.core.names import ABSENT_STYLE
from needle_action.results import ReorderDepth

PromptStatus = Literal["new", "deleted", "renamed", "changed", "unchanged"]
Tier = Literal["green", "yellow", "red"]
CellVerdict = Literal[
    "ok", "regressed", "improved", "inconclusive", "below-threshold", "new", "removed", "not-run"
]
Verdict = Literal["pass", "fail-budget", "fail-recall", "fail", "inconclusive", "underpowered"]
FailureKind = Literal["budget", "growth", "recall-regression", "recall-threshold", "error"]

# the "yellow" tier: more than this share of the growth allowance used, or less headroom than this
YELLOW_GROWTH_SHARE = 0.5
YELLOW_HEADROOM_SHARE = 0.10


class CompareModel(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TokenDelta(CompareModel):
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
    budget_source: str | None = Field(
        default=None, description='max_input_tokens = "auto": where it came from'
    )
    same_request_as: str | None = Field(
        default=None, description="an earlier fixture whose request is the same as this case's"
    )
    base_sections: dict[str, int] | None = Field(
        default=None, description="base tokens per section (system, tools, messages, context, params)"
    )
    head_sections: dict[str, int] | None = Field(default=None, description="head tokens per section")

    def section_deltas(self) -> dict[str, int]:
        """Head - base tokens per section, for the sections either side counted (empty without both)."""
        if self.base_sections is None or self.head_sections is None:
            return {}
        names = list(dict.fromkeys([*self.head_sections, *self.base_sections]))
        return {n: self.head_sections.get(n, 0) - self.base_sections.get(n, 0) for n in names}


class CellDelta(CompareModel):
    # the base_*/head_* fields repeat each other's form on purpose (`duplicates` pairs them): they
    # are the flat field names of a cell in the comparison JSON (`needle report --format json`)
    style: str = Field(default="", description="needle style of the cell")
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
    head_distractor_answers: int | None = None

    @property
    def abstention(self) -> bool:
        """An ``absent`` cell: its rate is the abstention rate, 1 - rate the hallucination rate."""
        return self.style == ABSENT_STYLE


class GroupDelta(CompareModel):
    """One group of cells (the middle, a depth, a size) of one needle style tested for a drop,
    base -> head.

    Rates are pooled over the group's cells; ``drop`` is the mean of the cells' drops (every cell
    counts the same whatever its trials). ``p_value`` is the one-sided exact stratified test
    (strata = cells); null when the group was not tested (drop below the floor, or no cell with
    full counts on both sides). ``regressed`` when Holm's procedure rejects it at the family alpha
    (the family spans every style's groups). In an ``absent`` group the rate is the abstention rate.
    """

    style: str = Field(default="", description="needle style of the group's cells")
    kind: Literal["middle", "depth", "size", "all"]
    label: str
    cells: int
    base_hits: int = 0
    base_trials: int = 0
    base_rate: float | None = None
    head_hits: int = 0
    head_trials: int = 0
    head_rate: float | None = None
    drop: float | None = None
    p_value: float | None = None
    holm_bound: float | None = Field(default=None, description="alpha / (m - rank + 1) it was held to")
    verdict: Literal["ok", "regressed", "below-floor", "untested"] = "ok"


class AnswerSample(CompareModel):
    """A wrong answer shown in the details (raw text; the renderer sanitises it)."""

    style: str = ""
    size: int
    depth: float
    expected: str
    answer: str


class MissSample(CompareModel):
    """One wrong answer of the head in a failing group (raw text; the renderer caps and sanitises it),
    with one right answer of the base at the same cell when the base has one."""

    size: int
    depth: float
    expected: str
    answer: str
    base_hit: str | None = Field(default=None, description="a base answer that hit at the same cell")


class GroupMisses(CompareModel):
    """Up to three sampled misses of a group that regressed or is below the threshold."""

    style: str = ""
    label: str = Field(description='the group, e.g. "middle depths (25%-75%)", or "below the threshold"')
    misses: list[MissSample] = Field(default_factory=list)


class StyleLine(CompareModel):
    """One needle style of one side, summed over its cells (what the report's per-style lines say)."""

    style: str
    hits: int
    trials: int
    rate: float | None = None
    status: str = "pass"
    diagnosis: str
    summary: str
    effective_context: int | None = None
    distractor_answers: int = 0
    tool_call_answers: int = 0  # trials answered with a tool call instead of text (misses)
    distractor_rate: float | None = None
    hallucination_rate: float | None = None


class RecallSide(CompareModel):
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
    trials: int = Field(default=0, description="trials of this side's own run, over every cell")
    history_trials: int = Field(default=0, description="trials pooled from earlier runs (base only)")
    history_runs: int = 0
    lost_trials: int = 0
    distractors: int = 0
    similarity: str | None = None
    styles: list[StyleLine] = Field(default_factory=list)
    reorder_ab: list[ReorderDepth] = Field(
        default_factory=list, description="recall.reorder_ab: middle depths as dealt and dealt by edge_order"
    )

    def style(self, name: str) -> StyleLine | None:
        """The summary line of needle style NAME on this side, if it ran."""
        return next((s for s in self.styles if s.style == name), None)


class RecallComparison(CompareModel):
    status: Literal["pass", "fail", "inconclusive", "underpowered", "skipped"]
    skipped_reason: str | None = None
    threshold: float | None = None
    alpha: float | None = Field(default=None, description="family-wise alpha over the groups")
    min_drop: float | None = Field(default=None, description="the drop a run is planned to catch")
    floor: float | None = Field(default=None, description="smallest pooled drop ever flagged")
    unchanged: bool = Field(default=False, description="same fingerprint on both sides: nothing to test")
    groups: list[GroupDelta] = Field(default_factory=list)
    detectable_drop: float | None = Field(
        default=None, description="drop in the planning group this comparison catches with 95% power"
    )
    detectable_in: str | None = Field(default=None, description="the planning group, e.g. middle depths")
    power: float | None = Field(
        default=None,
        description="chance the design as run catches min_drop in the planning group: the comparison "
        "replayed on draws at the base's measured rates (across runs: its stored runs and spread)",
    )
    power_replays: int | None = Field(default=None, description="simulated pull requests behind `power`")
    planned_power: float | None = Field(
        default=None, description="the power the head's plan stated at an assumed base rate"
    )
    planned_base_rate: float | None = Field(
        default=None, description="the base rate that plan assumed (no base known)"
    )
    styles: list[str] = Field(default_factory=list, description="needle styles, head's first")
    sizes: list[int] = Field(default_factory=list)
    depths: list[float] = Field(default_factory=list)
    cells: list[CellDelta] = Field(default_factory=list)
    base: RecallSide | None = None
    head: RecallSide | None = None
    comparable: bool = Field(
        default=True, description="false when base used another model, scoring or look-alikes"
    )
    samples: list[AnswerSample] = Field(default_factory=list)
    misses: list[GroupMisses] = Field(
        default_factory=list, description="sampled head misses of each group that regressed or is below"
    )
    notes: list[str] = Field(
        default_factory=list, description="what the reader must know about this comparison"
    )
    test: Literal["paired", "unpaired", "cross-run"] | None = Field(
        default=None, description="paired: same seed and trials on both sides (exact stratified McNemar)"
    )
    looks: list[int] = Field(default_factory=list, description="head trials per cell at each look")
    look: int | None = Field(default=None, description="the look (1-based) that decided the verdict")
    stopped_early: bool = Field(default=False, description="decided before the last look")
    family_prompts: int = Field(default=0, description="prompts in the pull request's Holm family")
    family_groups: int = Field(default=0, description="groups in the pull request's Holm family")
    planned_calls: int = Field(default=0, description="the head's full plan: cells x planned trials")

    def cell(self, size: int, depth: float, style: str | None = None) -> CellDelta | None:
        """The cell at SIZE x DEPTH of STYLE (any style when None)."""
        return next(
            (
                c
                for c in self.cells
                if c.size == size and abs(c.depth - depth) < 1e-9 and (style is None or c.style == style)
            ),
            None,
        )


class DiffHunk(CompareModel):
    """One hunk of a unified diff of the assembled view; ``lines`` start with ' ', '-' or '+'."""

    section: str = Field(
        description="the view section the hunk's first change is in: system, tools, user ..."
    )
    base_start: int
    base_lines: int
    head_start: int
    head_lines: int
    lines: list[str] = Field(default_factory=list)


class CaseDiff(CompareModel):
    """The assembled request of one prompt x fixture, base vs head (context slot collapsed)."""

    fixture: str | None
    sections: list[str] = Field(default_factory=list, description="sections with a change, in view order")
    added: int = 0
    removed: int = 0
    hunks: list[DiffHunk] = Field(default_factory=list)
    partial: bool = Field(default=False, description="a side's stored view was cut to fit (see results)")
    note: str | None = Field(default=None, description="why there is no line diff, when there is none")


class PromptComparison(CompareModel):
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
    diffs: list[CaseDiff] = Field(default_factory=list, description="assembled requests that changed")


class Failure(CompareModel):
    """A reason the check fails, located on the template for a ``::error file=,line=::`` annotation.

    ``file`` is the template (relative to the threshold file's folder); ``line`` a line in it when
    known (the action fills in the first line the pull request changed); ``config_line`` is the
    ``[prompts.NAME]`` line in the threshold file.
    """

    # alike in form only to flow/settings.py's PullRequest (`duplicates` pairs the field lists)
    kind: FailureKind
    prompt: str
    title: str
    message: str
    file: str | None = None
    line: int | None = None
    config_line: int | None = None


class SideTotals(CompareModel):
    calls: int = 0
    cached_calls: int = 0
    saved_calls: int = 0
    cost_usd: float = 0.0
    seconds: float = 0.0
    partial: bool = False
    speculative_calls: int = 0
    prompt_tokens: int = 0  # input tokens sent, cached or not
    billed_input_tokens: float = 0.0  # weighted as billed (cache writes 1.25x, reads 0.1x)
    uncached_cost_usd: float = 0.0  # the same calls without prompt cache or batch discount


class TrendPoint(CompareModel):
    """One commit of one prompt's trend."""

    commit: str
    tokens: int | None = Field(default=None, description="the largest fixture's tokens")
    effective_context: int | None = None
    mid_hits: int = 0
    mid_trials: int = 0
    mid_rate: float | None = Field(
        default=None, description="recall pooled over the depths strictly inside 0..1"
    )
    drift: str | None = Field(default=None, description="set when recall fell with an unchanged fingerprint")


class PromptTrend(CompareModel):
    """One prompt's points, oldest first."""

    prompt: str
    points: list[TrendPoint] = Field(default_factory=list)


class Comparison(CompareModel):
    verdict: Verdict
    headline: str
    token_change: str | None = Field(
        default=None, description='tokens changed and where: "+412 tokens, 380 of them in tools"'
    )
    has_base: bool
    base_commit: str | None = None
    head_commit: str | None = None
    budget_failed: bool = False
    recall_regressed: bool = Field(
        default=False, description="a significant drop vs base, or a new cell below threshold"
    )
    recall_inconclusive: bool = False
    recall_underpowered: bool = Field(default=False, description="a cap or outage stopped planned trials")
    recall_family_prompts: int = Field(
        default=0, description="prompts whose recall groups share one Holm family (the whole pull request)"
    )
    recall_alpha: float | None = Field(default=None, description="the family's false-block rate")
    provider_outage: bool = False
    errors: bool = False
    prompts: list[PromptComparison] = Field(default_factory=list)
    failures: list[Failure] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
    head_totals: SideTotals = Field(default_factory=SideTotals)
    base_totals: SideTotals | None = None
    history: list[PromptTrend] = Field(
        default_factory=list,
        description="main-branch trend of the changed prompts (data branch), this head last",
    )

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
