"""The results file: what one run measured, and the contract between stages.

``needle budget --json``, ``needle recall --json`` and ``needle check --json`` write it; the
compare stage reads a base and a head one; the report stage renders them. ``schema_version``
changes only on incompatible changes (documented in docs/results-schema.md).
"""

from __future__ import annotations

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
from needle_action.config.model import Growth, parse_growth
from needle_action.errors import ConfigError

SCHEMA_VERSION = 1

Status = Literal["pass", "fail", "skipped", "error"]
CellStatus = Literal["pass", "fail", "undecided"]
Diagnosis = Literal[
    "all-pass", "lost-in-the-middle", "size-limited", "flaky", "inconclusive", "mixed-failure"
]


class Model(BaseModel):
    model_config = ConfigDict(extra="ignore")


class TokenCount(Model):
    tokens: int = Field(description="count after the safety factor (what budgets use)")
    raw_tokens: int = Field(description="what the counter itself returned")
    counter: str = Field(description="e.g. tiktoken:o200k_base, anthropic, local:gemma3-270m")
    exact: bool = Field(description="true when the counter is the model's own tokenizer/API")
    safety_factor: float = 1.0


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


class RecallAnswer(Model):
    trial: int
    needle: str = Field(description="the expected answer for this trial")
    answer: str = Field(description="raw model output (unsanitised; sanitise before display)")
    hit: bool
    cached: bool = False


class RecallCell(Model):
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
    answers: list[RecallAnswer] = Field(default_factory=list)

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


class RecallResult(Model):
    provider: str
    model: str
    fixture: str | None
    needle_style: str
    scoring: str
    threshold: float
    seed: int
    # regression tolerances from the threshold file (RecallSettings), so a results file is self-describing
    alpha: float = 0.05
    min_drop: float = 0.2
    settings_hash: str = Field(description="hash of (assembled prompt, model, needle settings, seed)")
    cells: list[RecallCell]
    effective_context: int | None = Field(description="largest size whose worst depth >= threshold")
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
    status: Status = "pass"
    saved_calls: int = Field(default=0, description="planned trials not run thanks to early stopping")
    cost_known: bool = Field(default=True, description="false when the price table does not know the model")
    reused_from: Literal["cache", "baseline"] | None = Field(
        default=None, description="set when this result was reused (0 new calls) instead of measured"
    )
    speculative_calls: int = Field(
        default=0, description="calls started ahead of early stopping whose answers were not needed"
    )
    lost_trials: int = Field(default=0, description="trials whose call failed after every retry")
    usage: TokenUsage = Field(default_factory=TokenUsage)
    batch: bool = Field(default=False, description="measured through the provider's batch API")
    shard: str | None = Field(
        default=None, description='"i/n" when only that slice of the cells was measured'
    )


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
        data = handler(self)
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
    def recall_status(self) -> Status:
        rs = [p.recall for p in self.prompts if p.recall is not None]
        if not rs:
            return "skipped"
        return "fail" if any(r.status == "fail" for r in rs) else "pass"

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
