"""The results file: what one run measured, and the contract between stages.

``needle budget --json``, ``needle recall --json`` and ``needle check --json`` write it; the
compare stage reads a base and a head one; the report stage renders them. ``schema_version``
changes only on incompatible changes (documented in docs/results-schema.md).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Any

from pydantic import (
    Field,
    SerializerFunctionWrapHandler,
    ValidationError,
    model_serializer,
)

from needle_action import __version__
from needle_action.core.errors import ConfigError
from needle_action.results.base import Model, RecallStatus, Status
from needle_action.results.budget import BudgetCase
from needle_action.results.recall import RecallResult, TokenUsage

SCHEMA_VERSION = 2  # 2: pooled verdicts (status "partial", alpha is family-wise, min_drop the power target)


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


def new_run_id() -> str:
    """An id for one job's measurement (both sides of a pull request measured together share it)."""
    return uuid.uuid4().hex[:16]


class Results(Model):
    schema_version: int = SCHEMA_VERSION
    tool_version: str = __version__
    created_at: str = Field(default_factory=lambda: datetime.now(UTC).isoformat(timespec="seconds"))
    config: str = Field(description="threshold file path as given")
    commit: str | None = None
    run_id: str | None = Field(
        default=None,
        description="the job that measured these results: sides with the same id share one run level",
    )
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


def stored_recall(history: Sequence[Results] | None, name: str) -> list[RecallResult] | None:
    """The recall of prompt NAME in every stored run of HISTORY (``--history DIR``, the data branch),
    oldest first as given; None when no history was given (not the same as none stored)."""
    if history is None:
        return None
    found = (r.prompt(name) for r in history)
    return [p.recall for p in found if p is not None and p.recall is not None]


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
