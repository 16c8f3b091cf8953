"""The recall half of a results file: cells, answers, usage, diagnosis, history, power, the result."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import (
    Field,
    model_validator,
)

from needle_action.config.model import LOOK_ALIKE_STYLES
from needle_action.core.names import ABSENT_STYLE
from needle_action.results.base import CellStatus, Diagnosis, Model, RecallStatus


def has_look_alikes(style: str, distractors: int) -> bool:
    """Whether STYLE's trials carry look-alikes (so its precision means something): an absent
    trial always has its near miss; the other styles that take them, when ``distractors`` > 0."""
    return style == ABSENT_STYLE or (distractors > 0 and style in LOOK_ALIKE_STYLES)


class RecallAnswer(Model):
    trial: int
    needle: str = Field(description="the expected answer for this trial")
    answer: str = Field(description="raw model output (unsanitised; sanitise before display)")
    hit: bool
    distractor: bool = Field(default=False, description="a miss that repeats a look-alike's value")
    tool_call: str | None = Field(
        default=None, description="the tool the model called instead of answering (a miss); null = text"
    )
    cached: bool = False


def check_counts(cell: Any) -> Any:
    """A cell's hits between 0 and its trials: a hand-edited or corrupt results file fails as it
    loads, as a ConfigError naming the file, not later inside the statistics of the compare stage."""
    if not 0 <= cell.hits <= cell.trials:
        raise ValueError(f"hits must be between 0 and trials ({cell.hits}/{cell.trials})")
    return cell


class RecallCell(Model):
    style: str = Field(default="", description="needle style of this cell (codeword, gold, absent, ...)")
    size: int = Field(description="target prompt size in tokens")
    depth: float = Field(description="needle position as a fraction of the context slot, 0..1")
    prompt_tokens: int | None = Field(default=None, description="measured tokens of the trial prompt")
    token_offset: int | None = Field(default=None, description="needle's absolute token offset in the prompt")
    hits: int
    trials: int
    planned_trials: int
    rate: float | None
    ci_low: float
    ci_high: float
    status: CellStatus
    stopped_early: bool = False
    distractor_answers: int = Field(default=0, description="trials answered with a look-alike's value")
    tool_call_answers: int = Field(
        default=0, description="trials answered with a tool call instead of text (counted as misses)"
    )
    hallucination_rate: float | None = Field(
        default=None, description="absent cells: share of trials that did not abstain (1 - rate)"
    )
    answers: list[RecallAnswer] = Field(default_factory=list)

    @property
    def abstention(self) -> bool:
        """An ``absent`` cell: hits are abstentions, misses are hallucinations."""
        return self.style == ABSENT_STYLE

    _hits_within_trials = model_validator(mode="after")(check_counts)


class TokenUsage(Model):
    """Input tokens as the provider reported them, and what they bill (docs/recall.md#cost)."""

    input_tokens: int = Field(default=0, description="uncached input tokens (billed at 1x)")
    cache_write_tokens: int = Field(default=0, description="input tokens written to the prompt cache")
    cache_read_tokens: int = Field(default=0, description="input tokens read from the prompt cache")
    output_tokens: int = 0
    billed_input_tokens: float = Field(
        default=0.0, description="input tokens weighted as billed (cache writes and reads at their rates)"
    )
    uncached_cost_usd: float = Field(
        default=0.0, description="what the same calls cost without cache or batch"
    )

    @property
    def prompt_tokens(self) -> int:
        """Every input token sent, cached or not."""
        return self.input_tokens + self.cache_write_tokens + self.cache_read_tokens

    def add(self, other: TokenUsage) -> None:
        self.input_tokens += other.input_tokens
        self.cache_write_tokens += other.cache_write_tokens
        self.cache_read_tokens += other.cache_read_tokens
        self.output_tokens += other.output_tokens
        self.billed_input_tokens = round(self.billed_input_tokens + other.billed_input_tokens, 2)
        self.uncached_cost_usd = round(self.uncached_cost_usd + other.uncached_cost_usd, 6)


class RecallDiagnosis(Model):
    kind: Diagnosis
    summary: str
    fix: str


class StyleSummary(Model):
    """One needle style of a prompt's run, over all its cells."""

    style: str
    hits: int
    trials: int
    rate: float | None
    status: RecallStatus = "pass"
    effective_context: int | None = Field(
        default=None, description="largest size whose every depth passes (null for absent)"
    )
    diagnosis: RecallDiagnosis
    distractor_answers: int = 0
    tool_call_answers: int = Field(default=0, description="trials answered with a tool call (misses)")
    distractor_rate: float | None = Field(
        default=None, description="share of trials answered with a look-alike's value (precision)"
    )
    hallucination_rate: float | None = Field(default=None, description="absent: share that did not abstain")


class HistoryCell(Model):
    style: str = Field(default="", description="needle style (empty in files of one-style runs)")
    size: int
    depth: float
    hits: int
    trials: int

    _hits_within_trials = model_validator(mode="after")(check_counts)


class HistoryRun(Model):
    """One earlier run's cells: a run has its own level (docs/recall.md, "Runs have levels")."""

    seed: int | None = None
    cells: list[HistoryCell] = Field(default_factory=list)


class RecallHistory(Model):
    """Trials of earlier complete runs with the same fingerprint (``pool_key``) and other seeds,
    pooled into this result's sample when it is the base of a comparison."""

    runs: int = Field(description="earlier runs pooled (one per seed)")
    seeds: list[int] = Field(default_factory=list)
    cells: list[HistoryCell] = Field(default_factory=list)
    by_run: list[HistoryRun] = Field(
        default_factory=list, description="the same trials run by run (the cross-run test's history)"
    )

    def trials(self) -> int:
        return sum(c.trials for c in self.cells)


class RecallPower(Model):
    """How the run's trials were planned, and what drop they can catch (docs/recall.md)."""

    trials: int = Field(description="trials per cell the run planned")
    auto: bool = Field(description='true when trials = "auto" chose them')
    group: str = Field(description="the group planned for, e.g. middle depths (25%-75%)")
    base_rate: float = Field(description="the base recall of that group the plan assumed")
    base_rate_source: Literal["baseline", "assumed"]
    min_drop: float
    power: float = Field(description="chance of catching a drop of min_drop with these trials")
    detectable_drop: float | None = Field(description="smallest drop caught with 95% power")


class CrossRun(Model):
    """What a verdict against a base from another run used (docs/recall.md, "Runs have levels"):
    the run-to-run spread and the stored runs behind it, so ``needle report`` re-derives it."""

    tau: float = Field(description="run-to-run sd on the logit scale the test used")
    runs: int = Field(description="stored unchanged runs it was estimated from (0: none)")
    method: Literal["moments", "prior"] = Field(description="moments: estimated; prior: the stated prior")
    raw_tau: float | None = Field(default=None, description="the estimate before shrinking to the prior")
    history: list[HistoryRun] = Field(
        default_factory=list, description="the stored runs' cells (they join the base side of the test)"
    )
    base: str | None = Field(
        default=None,
        description="digest of the base run's cells it was made against (reused only for that base)",
    )


class ReorderDepth(Model):
    """``recall.reorder_ab``: one middle depth of one style, pooled over the sizes, as the context
    was dealt (A: the run's own cells) and dealt again by ``runtime.edge_order`` (B)."""

    style: str
    depth: float
    hits: int
    trials: int
    rate: float | None
    edge_hits: int
    edge_trials: int
    edge_rate: float | None


class RecallResult(Model):
    provider: str
    model: str
    fixture: str | None
    needle_style: str = Field(description="the style, or the styles joined by '+'")
    scoring: str
    threshold: float
    seed: int
    # regression settings from the threshold file (RecallSettings), so a results file is self-describing
    alpha: float = Field(default=0.01, description="family-wise alpha of the base-vs-head comparison")
    min_drop: float = Field(default=0.2, description="drop the run is planned to catch (95% power)")
    settings_hash: str = Field(description="hash of (assembled prompt, model, needle settings, seed)")
    pool_key: str | None = Field(
        default=None,
        description="hash of what decides the answers (no seed, no trials): runs that share it pool",
    )
    cells: list[RecallCell]
    effective_context: int | None = Field(description="largest size up to which recall holds (pooled)")
    effective_context_low: int | None = Field(
        default=None, description="largest size up to which every size is demonstrably above the threshold"
    )
    effective_context_high: int | None = Field(
        default=None, description="first size at which recall does not hold (the estimate is below it)"
    )
    effective_context_relative: int | None = Field(
        default=None,
        description="largest size whose worst depth >= threshold x the smallest size's worst depth",
    )
    diagnosis: RecallDiagnosis
    calls: int = 0
    cached_calls: int = 0
    cost_usd: float = 0.0
    partial: bool = False
    partial_reason: str | None = None
    status: RecallStatus = Field(
        default="pass",
        description="fail: some group is below the threshold (pooled); partial: cut short, else pass",
    )
    saved_calls: int = Field(default=0, description="planned trials not run thanks to early stopping")
    lost_trials: int = Field(default=0, description="trials whose call failed after every retry")
    full_trials: bool = Field(
        default=True, description="false when cells could stop early (not comparable with a base)"
    )
    power: RecallPower | None = None
    look: int | None = Field(
        default=None,
        description="the look of the group-sequential comparison that stopped this run early "
        "(1-based; None: the full plan ran). A stopped run is a complete verdict, never pooled",
    )
    stop_on_drop: bool = Field(default=False, description="the comparison may block at an early look")
    stop_on_no_change: bool = Field(default=False, description="the comparison may pass at an early look")
    history: RecallHistory | None = None
    cross_run: CrossRun | None = Field(
        default=None, description="set when this head was compared with a base from another run"
    )
    cost_known: bool = Field(default=True, description="false when the price table does not know the model")
    reused_from: Literal["cache", "baseline"] | None = Field(
        default=None, description="set when this result was reused (0 new calls) instead of measured"
    )
    speculative_calls: int = Field(
        default=0, description="calls started ahead of early stopping whose answers were not needed"
    )
    usage: TokenUsage = Field(default_factory=TokenUsage)
    batch: bool = Field(default=False, description="measured through the provider's batch API")
    shard: str | None = Field(
        default=None, description='"i/n" when only that slice of the cells was measured'
    )
    distractors: int = Field(default=0, description="look-alikes per trial (recall.distractors)")
    similarity: str | None = Field(default=None, description="their similarity, when there are any")
    styles: list[StyleSummary] = Field(default_factory=list, description="one per needle style, in run order")
    reorder_ab: list[ReorderDepth] | None = Field(
        default=None,
        description="recall.reorder_ab: the middle depths again with the context dealt by edge_order",
    )

    @model_validator(mode="after")
    def _cells_name_their_style(self) -> RecallResult:
        # files written before cells carried a style ran one style: name it on every cell
        for cell in self.cells:
            if not cell.style:
                cell.style = self.needle_style
        return self

    def style_names(self) -> list[str]:
        """The styles of the cells, in run order."""
        return list(dict.fromkeys(c.style for c in self.cells))
