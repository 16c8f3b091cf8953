"""The comparison's data: what the report renders, the action turns into an exit code, and the
fork pattern's ``post-report`` re-validates. Plain pydantic models, no logic beyond lookups."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

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


class CellDelta(CompareModel):
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


class AnswerSample(CompareModel):
    """A wrong answer shown in the details (raw text; the renderer sanitises it)."""

    size: int
    depth: float
    expected: str
    answer: str


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


class RecallComparison(CompareModel):
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


class Failure(CompareModel):
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


class Comparison(CompareModel):
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
