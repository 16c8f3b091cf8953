"""The results file: what one run measured, and the contract between stages.

``needle budget --json``, ``needle recall --json`` and ``needle check --json`` write it; the
compare stage reads a base and a head one; the report stage renders them. ``schema_version``
changes only on incompatible changes (documented in docs/results-schema.md).
"""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainSerializer,
    SerializerFunctionWrapHandler,
    ValidationError,
    model_serializer,
    model_validator,
)

from needle_action import __version__
from needle_action.config.model import LOOK_ALIKE_STYLES, Growth, parse_growth
from needle_action.core.errors import ConfigError
from needle_action.core.names import ABSENT_STYLE

SCHEMA_VERSION = 2  # 2: pooled verdicts (status "partial", alpha is family-wise, min_drop the power target)

Status = Literal["pass", "fail", "skipped", "error"]
RecallStatus = Literal["pass", "fail", "partial"]
CellStatus = Literal["pass", "fail", "undecided"]
Diagnosis = Literal[
    "all-pass",
    "lost-in-the-middle",
    "size-limited",
    "flaky",
    "inconclusive",
    "mixed-failure",
    "hallucination",
]


def has_look_alikes(style: str, distractors: int) -> bool:
    """Whether STYLE's trials carry look-alikes (so its precision means something): an absent
    trial always has its near miss; the other styles that take them, when ``distractors`` > 0."""
    return style == ABSENT_STYLE or (distractors > 0 and style in LOOK_ALIKE_STYLES)


class Model(BaseModel):
    model_config = ConfigDict(extra="ignore")


class TokenCount(Model):
    tokens: int = Field(description="count after the safety factor (what budgets use)")
    raw_tokens: int = Field(description="what the counter itself returned")
    counter: str = Field(description="e.g. tiktoken:o200k_base, anthropic, local:gemma3-270m")
    exact: bool = Field(description="true when the counter is the model's own tokenizer/API")
    safety_factor: float = 1.0
    # the count by section (tokens/sections.py); carried to BudgetCase.sections, not stored twice
    sections: dict[str, int] | None = Field(default=None, exclude=True)


def _growth_from_text(value: object) -> Growth | None:
    # results files store the limit as it reads ("10%", "500 tokens"); the model keeps it as data
    if isinstance(value, str):
        return parse_growth(value.removesuffix(" tokens"))
    return parse_growth(value)


GrowthLimit = Annotated[
    Growth | None,
    BeforeValidator(_growth_from_text),
    PlainSerializer(lambda g: str(g) if g is not None else None, return_type=str | None),
]


# the assembled view stored per case: enough to diff base vs head from results alone, bounded so a
# hostile or huge prompt cannot bloat the results file (the context slot is already one line)
VIEW_MAX_CHARS = 200_000
VIEW_LINE_MAX = 2_000
_VIEW_LINE_HEAD, _VIEW_LINE_TAIL = 1_000, 200


def _cap_line(line: str) -> str:
    """A long line as its start and end around a marker that names the middle's size and hash, so
    a change anywhere in it still changes the stored line."""
    if len(line) <= VIEW_LINE_MAX:
        return line
    middle = line[_VIEW_LINE_HEAD:-_VIEW_LINE_TAIL]
    digest = hashlib.sha256(middle.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return f"{line[:_VIEW_LINE_HEAD]}…[{len(middle):,} more chars · sha {digest}]…{line[-_VIEW_LINE_TAIL:]}"


class AssembledView(Model):
    """The assembled request of one case as labelled text (``--- system ---``, ``--- tools ---``,
    ``--- user ---`` ... ``--- params ---``), the context slot collapsed to one line with its size:
    what the compare stage diffs, base vs head (docs/comment.md#assembled-prompt-diff)."""

    text: str = Field(description="the labelled view, lines capped, at most VIEW_MAX_CHARS characters")
    chars: int = Field(description="length of the full view before any cap")
    sha256: str = Field(description="sha256 of the full view: equal = same view")
    truncated: bool = Field(default=False, description="true when lines or the end were cut to fit")

    @classmethod
    def of(cls, rendered: Any) -> AssembledView:
        """The view of RENDERED (an ``assemble.RenderedPrompt``), context collapsed, capped."""
        view = getattr(rendered, "view", None)
        full = view(collapse_context=True) if callable(view) else rendered.as_text()
        lines = [_cap_line(line) for line in full.split("\n")]
        text = "\n".join(lines)
        cut = len(text) > VIEW_MAX_CHARS
        if cut:
            text = (
                text[:VIEW_MAX_CHARS].rsplit("\n", 1)[0]
                + f"\n…[{len(full) - VIEW_MAX_CHARS:,} more chars not stored]"
            )
        digest = hashlib.sha256(full.encode("utf-8", "surrogatepass")).hexdigest()
        return cls(text=text, chars=len(full), sha256=digest, truncated=cut or text != full)


class BudgetCase(Model):
    """One prompt rendered with one fixture."""

    fixture: str | None = Field(description="fixture path relative to root; null = no fixture")
    content_hash: str = Field(description="sha256 of the assembled request (messages + system)")
    count: TokenCount
    max_input_tokens: int | None
    reserve_output_tokens: int
    headroom: int | None = Field(description="max_input_tokens - tokens - reserve; negative = over")
    baseline_tokens: int | None = None
    growth_tokens: int | None = None
    growth_percent: float | None = None
    max_growth: GrowthLimit = None
    status: Status
    reasons: list[str] = Field(default_factory=list)
    budget_source: str | None = Field(
        default=None,
        description='max_input_tokens = "auto": where the budget came from (or why there is none)',
    )
    sections: dict[str, int] | None = Field(
        default=None,
        description="tokens by section: system, tools, messages, context, params (they add up to "
        "count.tokens; each is the difference it makes to the count, see docs/tokens.md)",
    )
    assembled: AssembledView | None = Field(
        default=None, description="the labelled view of the request the compare stage diffs"
    )


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

    @model_validator(mode="after")
    def _hits_within_trials(self) -> RecallCell:
        # a hand-edited or corrupt results file must fail here, as a ConfigError naming the file,
        # not later inside the statistics of the compare stage
        if not 0 <= self.hits <= self.trials:
            raise ValueError(f"hits must be between 0 and trials ({self.hits}/{self.trials})")
        return self


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


class RecallHistory(Model):
    """Trials of earlier complete runs with the same fingerprint (``pool_key``) and other seeds,
    pooled into this result's sample when it is the base of a comparison."""

    runs: int = Field(description="earlier runs pooled (one per seed)")
    seeds: list[int] = Field(default_factory=list)
    cells: list[HistoryCell] = Field(default_factory=list)

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


class SkipKind(StrEnum):
    """Why a prompt's recall did not run; later stages branch on this, never on the message."""

    DISABLED = "disabled"  # recall.enabled = false
    NO_SLOTS = "no-slots"  # context_var / question_var not set
    INPUT_OFF = "input-off"  # the action's `recall: false` input
    NO_KEY = "no-key"  # the provider's key variable is empty (fork pull requests get no secrets)
    PROVIDER_UNAVAILABLE = "provider-unavailable"  # not one call could be made
    NO_SIZE = "no-size"  # sizes = "auto" leaves no size above the prompt's own


class PromptResult(Model):
    name: str
    template: str = Field(description="template path relative to root")
    template_line: int | None = Field(default=None, description="line of [prompts.NAME] in the config")
    model: str
    cases: list[BudgetCase] = Field(default_factory=list)
    recall: RecallResult | None = None
    recall_skipped: str | None = Field(default=None, description="why recall did not run, if it did not")
    recall_skip_kind: SkipKind | None = Field(
        default=None, description="the same as a kind; only when skipped"
    )
    error: str | None = None

    def skip_recall(self, kind: SkipKind, message: str) -> None:
        """Record that recall did not run for this prompt, and why."""
        self.recall, self.recall_skipped, self.recall_skip_kind = None, message, kind

    def clear_skip(self) -> None:
        self.recall_skipped, self.recall_skip_kind = None, None

    @model_serializer(mode="wrap")
    def _omit_unset_skip_kind(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # the kind exists only for skipped prompts: results files of prompts that ran stay as they were
        data: dict[str, Any] = handler(self)
        if data.get("recall_skip_kind") is None:
            data.pop("recall_skip_kind", None)
        return data


class RunTotals(Model):
    calls: int = 0
    cached_calls: int = 0
    saved_calls: int = Field(default=0, description="planned trials not run thanks to early stopping")
    cost_usd: float = 0.0
    seconds: float = 0.0
    partial: bool = False
    provider_unavailable: bool = Field(default=False, description="a provider could not be used")
    speculative_calls: int = 0
    usage: TokenUsage = Field(default_factory=TokenUsage)


class Results(Model):
    schema_version: int = SCHEMA_VERSION
    tool_version: str = __version__
    created_at: str = Field(default_factory=lambda: datetime.now(UTC).isoformat(timespec="seconds"))
    config: str = Field(description="threshold file path as given")
    commit: str | None = None
    prompts: list[PromptResult] = Field(default_factory=list)
    totals: RunTotals = Field(default_factory=RunTotals)

    @property
    def budget_status(self) -> Status:
        cases = [c for p in self.prompts for c in p.cases]
        if any(p.error for p in self.prompts) or any(c.status == "error" for c in cases):
            return "error"
        return "fail" if any(c.status == "fail" for c in cases) else "pass"

    @property
    def recall_status(self) -> Status | RecallStatus:
        """skipped (nothing ran), fail (some prompt's recall fails), partial (some prompt's run was
        cut short: never a pass), else pass."""
        rs = [p.recall for p in self.prompts if p.recall is not None]
        if not rs:
            return "skipped"
        if any(r.status == "fail" for r in rs):
            return "fail"
        return "partial" if any(r.partial for r in rs) else "pass"

    def prompt(self, name: str) -> PromptResult | None:
        return next((p for p in self.prompts if p.name == name), None)

    def dump(self, path: str | Path) -> None:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(self.model_dump_json(indent=2) + "\n", encoding="utf-8")


def load_results(path: str | Path) -> Results:
    """Read a results file; any problem is a ConfigError naming the file."""
    p = Path(path)
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(
            f"results file not found: {p}", file=p, hint="run `needle budget --json FILE` first"
        ) from None
    except json.JSONDecodeError as exc:
        raise ConfigError(f"not valid JSON: {exc.msg}", file=p, line=exc.lineno) from None
    if not isinstance(data, dict) or "schema_version" not in data:
        raise ConfigError("not a needle results file (no schema_version)", file=p)
    if data["schema_version"] != SCHEMA_VERSION:
        raise ConfigError(
            f"results schema_version {data['schema_version']} is not supported (this needle reads {SCHEMA_VERSION})",
            file=p,
            hint="re-run the baseline with this version of needle",
        )
    try:
        return Results.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(x) for x in first["loc"])
        raise ConfigError(f"invalid results file at {where}: {first['msg']}", file=p) from None
