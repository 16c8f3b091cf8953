"""The threshold file (``needle.toml``): typed once, validated with pydantic.

Shape::

    [defaults]            # any PromptSettings key; every prompt inherits it
    model = "claude-sonnet-5-5"
    max_input_tokens = 8000

    [defaults.recall]     # any RecallSettings key
    sizes = [2000, 8000]

    [prompts.rag_answer]  # one table per prompt; overrides defaults key by key
    template = "prompts/rag_answer.j2"
    fixtures = ["fixtures/rag/*.yaml"]
    context_var = "documents"
    question_var = "question"

Paths in the file are relative to the file's own folder (the "root"); nothing may point outside it.
``load_config`` (in ``needle_action.config.loader``) turns the file into a :class:`Config` or raises
``ConfigError`` with file:line.
"""

from __future__ import annotations

import difflib
import re
from pathlib import Path
from typing import Annotated, Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from needle_action.config.cases import case_ref, is_case_file, read_cases
from needle_action.core.names import NEEDLE_STYLES, PROVIDER_NAMES, NeedleStyle, ProviderName
from needle_action.core.workspace import Workspace

DEFAULT_DEPTHS = [0.0, 0.25, 0.5, 0.75, 1.0]
# concurrency = "auto" starts here: about a top standard tier's requests cap at 1 s a call
AUTO_CONCURRENCY = 64
MAX_CONCURRENCY = 256  # the most calls in flight any run has
PROVIDERS = PROVIDER_NAMES


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=False)


class Growth(BaseModel):
    """``max_growth`` parsed: ``"10%"`` -> percent=10; ``500`` -> tokens=500."""

    percent: float | None = None
    tokens: int | None = None

    def allowed(self, base_tokens: int) -> float:
        if self.percent is not None:
            return base_tokens * self.percent / 100.0
        return float(self.tokens or 0)

    def __str__(self) -> str:
        return f"{self.percent:g}%" if self.percent is not None else f"{self.tokens} tokens"


_GROWTH_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*%\s*$")


def parse_growth(value: object) -> Growth | None:
    if value is None:
        return None
    if isinstance(value, Growth):
        return value
    if isinstance(value, bool):
        raise ValueError('max_growth must be a percentage like "10%" or a whole number of tokens')
    if isinstance(value, int):
        if value < 0:
            raise ValueError("max_growth must not be negative")
        return Growth(tokens=value)
    if isinstance(value, str):
        m = _GROWTH_RE.match(value)
        if m:
            return Growth(percent=float(m.group(1)))
        if value.strip().isdigit():
            return Growth(tokens=int(value.strip()))
    raise ValueError('max_growth must be a percentage like "10%" or a whole number of tokens')


class NeedleSpec(Strict):
    """A user-defined needle (style ``custom``): a fact template and the question that asks for it.

    ``{value}`` in ``fact`` and ``answer`` is replaced by a fresh unguessable value per trial.
    """

    fact: str
    question: str
    answer: str = "{value}"


# styles that take generated look-alikes (gold moves the user's own items, multihop brings its own
# decoys, custom needles have no subject to vary)
LOOK_ALIKE_STYLES = ("codeword", "sentence", "distractors", "nonlexical", "absent")
DEFAULT_DISTRACTORS = {"distractors": 3}  # the distractors style has always placed three


class RecallSettings(Strict):
    enabled: bool = True
    sizes: list[int] | Literal["auto"] = Field(default_factory=lambda: [2000, 8000])
    depths: list[float] = Field(default_factory=lambda: list(DEFAULT_DEPTHS))
    # "auto": the fewest trials per cell that catch a drop of min_drop with 95% power (recall/power.py)
    trials: int | Literal["auto"] = "auto"
    threshold: float = Field(default=0.8, ge=0.0, le=1.0, description="minimum recall per cell")
    needle: NeedleStyle | list[NeedleStyle] = Field(
        default="codeword", description="needle style, or a list: each cell runs one style"
    )
    needles: list[NeedleSpec] = Field(default_factory=list)
    distractors: int | None = Field(
        default=None, ge=0, le=8, description="look-alikes per trial; default 0 (3 for the distractors style)"
    )
    similarity: Literal["low", "medium", "high"] = "high"
    abstain_phrases: list[str] | None = Field(
        default=None, description="absent: replies that count as abstaining; default a built-in list"
    )
    abstain_regex: str | None = None
    scoring: Literal["strict", "contains", "regex"] = "strict"
    answer_regex: str | None = None
    filler_globs: list[str] = Field(default_factory=list)
    fixture: str | None = Field(default=None, description="fixture used for recall; default the first")
    seed: int = 0
    max_calls: int | None = Field(default=None, ge=1)
    max_cost_usd: float | None = Field(default=None, gt=0)
    # "auto": start at AUTO_CONCURRENCY, open up to MAX_CONCURRENCY while the provider's rate-limit
    # headers show room; a number: the window starts there and never goes above (providers/ratelimit.py)
    concurrency: Annotated[int, Field(ge=1, le=MAX_CONCURRENCY)] | Literal["auto"] = Field(
        default="auto", description="calls in flight: a fixed ceiling, or auto"
    )
    early_stop: bool = True
    prompt_cache: bool = Field(
        default=True, description="Anthropic: cache the prefix trials share (cache_control)"
    )
    max_output_tokens: int = Field(default=64, ge=1)
    # a list slot: run the middle depths again with the context dealt by runtime.edge_order (recall/reorder.py)
    reorder_ab: bool = False
    # base vs head: family-wise false-block rate over the groups one comparison tests (Holm)
    alpha: float = Field(default=0.01, gt=0.0, lt=1.0)
    # the drop a run is planned to catch with 95% power; drops below min_drop / 2 never fail
    min_drop: float = Field(default=0.2, gt=0.0, le=1.0, description="drop a run must catch")
    # base vs head, group-sequential (recall/sequential.py): block at a look on a clear drop, pass at
    # a look when no group can hide the drop the plan detects; both off = the fixed design
    stop_on_drop: bool = True
    stop_on_no_change: bool = True

    @field_validator("sizes")
    @classmethod
    def _sizes(cls, v: list[int] | Literal["auto"]) -> list[int] | Literal["auto"]:
        if v == "auto":
            return v
        if not v:
            raise ValueError('sizes must list at least one size, or be "auto"')
        if any(s < 64 for s in v):
            raise ValueError("every size must be at least 64 tokens")
        return sorted(set(v))

    @field_validator("trials")
    @classmethod
    def _trials(cls, v: int | Literal["auto"]) -> int | Literal["auto"]:
        if v != "auto" and not 1 <= v <= 1000:
            raise ValueError('trials must be "auto" or a whole number from 1 to 1000')
        return v

    @field_validator("depths")
    @classmethod
    def _depths(cls, v: list[float]) -> list[float]:
        if not v:
            raise ValueError("depths must list at least one depth between 0 and 1")
        if any(d < 0 or d > 1 for d in v):
            raise ValueError("every depth must be between 0.0 (start) and 1.0 (end)")
        return sorted(set(float(d) for d in v))

    @property
    def concurrency_bounds(self) -> tuple[int, int]:
        """(where the window of calls in flight starts, the most it may open to)."""
        if self.concurrency == "auto":
            return AUTO_CONCURRENCY, MAX_CONCURRENCY
        return self.concurrency, self.concurrency

    @property
    def styles(self) -> list[str]:
        """The needle styles this prompt runs, in the order written."""
        return [self.needle] if isinstance(self.needle, str) else list(self.needle)

    def distractor_count(self, style: str) -> int:
        """Look-alikes per trial of STYLE (0 for styles that take none)."""
        if style not in LOOK_ALIKE_STYLES:
            return 0
        return self.distractors if self.distractors is not None else DEFAULT_DISTRACTORS.get(style, 0)

    @field_validator("needle", mode="before")
    @classmethod
    def _styles(cls, v: object) -> object:  # before validation: any TOML value
        # before the Literal check, so the message names the word that is wrong
        names = v if isinstance(v, list) else [v]
        for name in names:
            if isinstance(name, str) and name not in NEEDLE_STYLES:
                close = difflib.get_close_matches(name, NEEDLE_STYLES, n=1)
                guess = f" (did you mean {close[0]!r}?)" if close else ""
                raise ValueError(f"unknown needle style {name!r}{guess}; styles: {', '.join(NEEDLE_STYLES)}")
        if isinstance(v, list):
            if not v:
                raise ValueError(
                    'needle must name a style, or list at least one (e.g. ["codeword", "absent"])'
                )
            if len(set(v)) != len(v):
                raise ValueError("needle lists a style twice")
        return v

    @field_validator("distractors")
    @classmethod
    def _look_alikes(cls, v: int | None, info: ValidationInfo) -> int | None:
        needle = info.data.get("needle", "codeword")
        styles = [needle] if isinstance(needle, str) else list(needle)
        if v and not set(styles) & set(LOOK_ALIKE_STYLES):
            raise ValueError(
                f"distractors apply to the {', '.join(LOOK_ALIKE_STYLES)} styles, and this prompt runs none "
                "of them (gold moves your own items, multihop has its own decoys)"
            )
        return v

    @field_validator("abstain_phrases")
    @classmethod
    def _phrases(cls, v: list[str] | None) -> list[str] | None:
        if v is not None and not all(p.strip() for p in v):
            raise ValueError("abstain_phrases must not contain an empty phrase (it would match every reply)")
        return v

    @field_validator("answer_regex", "abstain_regex")
    @classmethod
    def _compiles(cls, v: str | None, info: ValidationInfo) -> str | None:
        if v is not None:
            try:
                re.compile(v)
            except re.error as exc:
                raise ValueError(f"{info.field_name} does not compile: {exc}") from None
        return v

    @model_validator(mode="after")
    def _combinations(self) -> Self:
        styles = self.styles
        if "custom" in styles and not self.needles:
            raise ValueError('needle = "custom" needs at least one [[...recall.needles]] entry')
        if self.scoring == "regex" and not self.answer_regex:
            raise ValueError('scoring = "regex" needs answer_regex')
        return self


class ProviderSettings(Strict):
    base_url: str | None = None
    api_key_env: str | None = Field(default=None, description="env var holding the key")
    model_path: str | None = Field(default=None, description="local: a .gguf file; default the bundled Gemma")
    n_ctx: int | None = None
    timeout_s: float = 60.0
    max_retries: int = Field(default=6, ge=0, le=20)
    batch_poll_s: float = Field(
        default=10.0,
        gt=0,
        description="--batch: first wait between status polls (grows x1.5 up to 5 minutes)",
    )

    @field_validator("api_key_env")
    @classmethod
    def _key_env_is_a_name(cls, v: str | None) -> str | None:
        # a key pasted here by mistake would otherwise be echoed as "$<key> is not set" in logs and
        # in the PR comment; the message deliberately does not repeat the value
        if v is not None and not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", v):
            raise ValueError(
                "api_key_env must name an environment variable (like ANTHROPIC_API_KEY), not hold the key"
            )
        return v


ContextAs = Literal["text", "tool_result", "document"]
UndefinedMode = Literal["strict", "lenient"]
TOOL_CHOICE_TYPES = ("auto", "any", "tool", "none")
# keys of a request that needle itself sets, and parameters that make the provider reach other
# services (a pull request's file must not point recall trials at servers of its choosing)
REQUEST_CORE = (
    "model",
    "max_tokens",
    "max_completion_tokens",
    "messages",
    "system",
    "tools",
    "tool_choice",
    "stream",
)
REQUEST_REFUSED = ("mcp_servers", "container")


class PromptSettings(Strict):
    """Keys allowed both in [defaults] and in each [prompts.NAME] table."""

    model: str = "claude-sonnet-5-5"
    provider: ProviderName = "anthropic"
    tokenizer: str = "tiktoken:o200k_base"
    tokenizer_safety_factor: float = Field(default=1.15, ge=1.0, le=3.0)
    # "auto": the base's measured effective context (tokens/budget.py, auto_budget)
    max_input_tokens: int | Literal["auto"] | None = None
    reserve_output_tokens: int = Field(default=1024, ge=0)
    max_growth: Growth | None = None
    context_var: str | None = None
    question_var: str | None = None
    # the request beyond the messages (docs/config.md "The request"): assemble/request.py applies them
    tools: str | None = Field(default=None, description="JSON tool list (Anthropic or OpenAI format)")
    tool_choice: dict[str, Any] | None = None
    request_params: dict[str, Any] = Field(default_factory=dict)
    context_as: ContextAs = "text"
    context_tool: str | None = None
    undefined: UndefinedMode | None = Field(
        default=None, description='"strict" or "lenient"; default: the template format\'s own runtime'
    )
    # the application's own jinja2.Environment(trim_blocks=..., lstrip_blocks=...): the same text
    trim_blocks: bool = False
    lstrip_blocks: bool = False
    recall: RecallSettings = Field(default_factory=RecallSettings)
    providers: dict[str, ProviderSettings] = Field(default_factory=dict)

    @field_validator("question_var")
    @classmethod
    def _distinct_slots(cls, v: str | None, info: ValidationInfo) -> str | None:
        if v is not None and v == info.data.get("context_var"):
            raise ValueError(
                f"question_var and context_var both name {v!r}: recall puts the context and the "
                "question in two different variables of the template"
            )
        return v

    @field_validator("max_input_tokens")
    @classmethod
    def _budget(cls, v: int | Literal["auto"] | None) -> int | Literal["auto"] | None:
        if isinstance(v, int) and v < 1:
            raise ValueError('max_input_tokens must be at least 1, or "auto"')
        return v

    @field_validator("max_growth", mode="before")
    @classmethod
    def _growth(cls, v: object) -> Growth | None:
        return parse_growth(v)

    @field_validator("tool_choice")
    @classmethod
    def _tool_choice(cls, v: dict[str, Any] | None) -> dict[str, Any] | None:
        if v is None:
            return v
        kind = v.get("type")
        if kind not in TOOL_CHOICE_TYPES:
            raise ValueError(
                "tool_choice needs type = "
                + ", ".join(f'"{t}"' for t in TOOL_CHOICE_TYPES)
                + ' (Anthropic\'s form: { type = "tool", name = "search" })'
            )
        if kind == "tool" and not (isinstance(v.get("name"), str) and v["name"]):
            raise ValueError(
                'tool_choice of type "tool" needs the tool\'s name: { type = "tool", name = "..." }'
            )
        return v

    @field_validator("request_params")
    @classmethod
    def _request_params(cls, v: dict[str, Any]) -> dict[str, Any]:
        for key in v:
            if key in REQUEST_CORE:
                raise ValueError(
                    f"request_params may not set {key!r}: needle sets it "
                    + ("(model, max tokens and messages come from the prompt and its settings)")
                )
            if key in REQUEST_REFUSED:
                raise ValueError(
                    f"request_params may not set {key!r}: it makes the provider call other services "
                    "on needle's behalf"
                )
        return v

    @field_validator("tokenizer")
    @classmethod
    def _tokenizer(cls, v: str) -> str:
        # only the encodings whose files ship with bpe-openai: anything else could not load offline
        ok = v in ("anthropic", "local", "tiktoken:o200k_base", "tiktoken:cl100k_base")
        if not ok:
            raise ValueError(
                'tokenizer must be "tiktoken:o200k_base", "tiktoken:cl100k_base", "anthropic" or "local"'
            )
        return v


_BUILDER_RE = re.compile(r"^[^:\x00]+\.py:[A-Za-z_][A-Za-z0-9_]*$")


class PromptConfig(PromptSettings):
    name: str
    # one of the three: a template file, a recorded request (JSON body), a builder in code
    template: str = ""
    request: str | None = Field(default=None, description="a recorded request body (.json)")
    builder: str | None = Field(default=None, description='a Python callable, "file.py:function"')
    context_path: str | None = Field(default=None, description="request: JSON Pointer to the haystack")
    question_path: str | None = Field(default=None, description="request: JSON Pointer to the question")
    fixtures: list[str] = Field(default_factory=list, description="paths or globs, relative to root")
    description: str | None = None

    @field_validator("builder")
    @classmethod
    def _builder_spec(cls, v: str | None) -> str | None:
        if v is not None and not _BUILDER_RE.match(v):
            raise ValueError(
                'builder must name a Python file and a function in it, like "app/prompts.py:build_support"'
            )
        return v

    @field_validator("context_path", "question_path")
    @classmethod
    def _pointer(cls, v: str | None, info: ValidationInfo) -> str | None:
        if v is not None and not v.startswith("/"):
            raise ValueError(
                f"{info.field_name} is a JSON Pointer (RFC 6901) starting with '/', like "
                '"/messages/0/content"'
            )
        return v

    @model_validator(mode="after")
    def _one_source(self) -> Self:
        given = [k for k in ("template", "request", "builder") if getattr(self, k)]
        if len(given) != 1:
            what = " and ".join(given) if given else "none of them"
            raise ValueError(
                f"a prompt needs exactly one of template, request or builder (this one sets {what})"
            )
        if self.request is None and (self.context_path or self.question_path):
            raise ValueError(
                "context_path and question_path point into a recorded request: they go with request = "
                '"...json" (templates and builders name their slots with context_var and question_var)'
            )
        return self

    def slots(self) -> tuple[tuple[str, str | None], tuple[str, str | None]]:
        """((key, value) naming the context slot, the same for the question): the variables
        ``context_var`` / ``question_var``, or for a recorded request the pointers ``context_path``
        / ``question_path`` (recall then uses the pointer itself as the slot's name)."""
        if self.request is not None:
            return ("context_path", self.context_path), ("question_path", self.question_path)
        return ("context_var", self.context_var), ("question_var", self.question_var)

    @property
    def source_file(self) -> str:
        """The file that defines the prompt: its template, recorded request, or builder's module."""
        if self.request:
            return self.request
        if self.builder:
            return self.builder.rpartition(":")[0]
        return self.template


class FileAccess(Strict):
    """``[files]``: which hidden files and folders templates may read (see docs/security.md).

    Hidden names (``.github/``, ``.env``, anything starting with ``.``) are refused to includes,
    fixtures and filler globs unless listed here, relative to the threshold file's folder; ``.git``
    is refused even when listed. In the action only the base branch's list counts.
    """

    allow_hidden: list[str] = Field(default_factory=list)
    # policy: run prompt builders (PR code) at all; in the action only the base branch's value counts
    builders: bool = False
    # policy: run builders where needle cannot take their network away (not Linux, no seccomp); by
    # default they refuse to run there. In the action only the base branch's value counts
    builders_unguarded: bool = False
    # policy: the Python builders run with (a venv's bin/python holding the app's packages), relative
    # to this file's folder or absolute; unset: the project's .venv/venv when usable, else needle's;
    # "system": never a venv of the checkout. In the action only the base branch's value counts
    builder_python: str | None = None

    @field_validator("builder_python")
    @classmethod
    def _a_path(cls, v: str | None) -> str | None:
        if v is not None and (not v.strip() or "\x00" in v):
            raise ValueError('builder_python names a Python: a path such as ".venv/bin/python", or "system"')
        return v

    @field_validator("allow_hidden")
    @classmethod
    def _plain_relative(cls, v: list[str]) -> list[str]:
        for entry in v:
            parts = entry.replace("\\", "/").strip("/").split("/")
            if not entry.strip() or entry.startswith(("/", "\\")) or ".." in parts or "\x00" in entry:
                raise ValueError(
                    f"allow_hidden entries are folders or files relative to the file's folder, got {entry!r}"
                )
            if ".git" in parts:
                raise ValueError(".git may never be read by templates (it holds the checkout's token)")
        return v

    def workspace(self, root: Path) -> Workspace:
        """ROOT with the hidden paths this table allows."""
        return Workspace(root, tuple(self.allow_hidden))


class Config(Strict):
    path: Path = Field(description="the threshold file itself")
    root: Path = Field(description="folder paths are relative to (the threshold file's folder)")
    defaults: PromptSettings = Field(default_factory=PromptSettings)
    prompts: dict[str, PromptConfig]
    files: FileAccess = Field(default_factory=FileAccess)
    # line of each [prompts.NAME] header and of each key, for file:line errors and annotations
    lines: dict[str, int] = Field(default_factory=dict, exclude=True)
    # "file:line: message" of each warning the loader printed (unknown request parameters)
    warnings: list[str] = Field(default_factory=list, exclude=True)

    def line_of(self, dotted: str) -> int | None:
        return self.lines.get(dotted)

    def template_path(self, prompt: PromptConfig) -> Path:
        return self.root / prompt.template

    @property
    def workspace(self) -> Workspace:
        """The folder the prompts' files are read from, and the hidden paths it allows (``[files]``)."""
        return self.files.workspace(self.root)

    def fixture_paths(self, prompt: PromptConfig) -> list[Path]:
        """Expanded fixture globs, sorted, relative order of patterns kept (validated at load); a glob
        skips hidden files and folders the workspace does not allow, as at load. A case file
        (``.jsonl``, ``.csv``) gives one path per case, ``cases.jsonl:3`` (:mod:`.cases`)."""
        out: list[Path] = []
        for pattern in prompt.fixtures:
            matches = (
                self.workspace.glob(pattern) if any(c in pattern for c in "*?[") else [self.root / pattern]
            )
            for m in matches:
                for case in self._cases(m):
                    if case not in out:
                        out.append(case)
        return out

    def _cases(self, path: Path) -> list[Path]:
        if not is_case_file(path):
            return [path]
        real = self.workspace.confine(path, what="fixture")
        return [case_ref(path, c.number) for c in read_cases(real)]

    def recall_fixture(self, prompt: PromptConfig) -> Path | None:
        """The fixture recall runs on: ``recall.fixture`` if set (checked at load), else the first."""
        if prompt.recall.fixture:
            return self.root / prompt.recall.fixture
        fixtures = self.fixture_paths(prompt)
        return fixtures[0] if fixtures else None
