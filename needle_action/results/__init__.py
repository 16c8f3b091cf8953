"""The results file: what one run measured, and the contract between stages.

One door for every stage: the file and its prompts (:mod:`.file`), a case's budget
(:mod:`.budget`), a prompt's recall (:mod:`.recall`), the status words they share (:mod:`.base`),
and the cache of finished recall results (:mod:`.cache`).
docs/results-schema.md documents the fields.
"""

from needle_action.results.base import CellStatus, Diagnosis, RecallStatus, Status
from needle_action.results.budget import VIEW_LINE_MAX, VIEW_MAX_CHARS, AssembledView, BudgetCase, TokenCount
from needle_action.results.file import (
    SCHEMA_VERSION,
    PromptResult,
    Results,
    RunTotals,
    SkipKind,
    load_results,
    new_run_id,
    stored_recall,
)
from needle_action.results.recall import (
    CrossRun,
    HistoryCell,
    HistoryRun,
    RecallAnswer,
    RecallCell,
    RecallDiagnosis,
    RecallHistory,
    RecallPower,
    RecallResult,
    ReorderDepth,
    StyleSummary,
    TokenUsage,
    has_look_alikes,
)

__all__ = [
    "SCHEMA_VERSION",
    "VIEW_LINE_MAX",
    "VIEW_MAX_CHARS",
    "AssembledView",
    "BudgetCase",
    "CellStatus",
    "CrossRun",
    "Diagnosis",
    "HistoryCell",
    "HistoryRun",
    "PromptResult",
    "RecallAnswer",
    "RecallCell",
    "RecallDiagnosis",
    "RecallHistory",
    "RecallPower",
    "RecallResult",
    "RecallStatus",
    "ReorderDepth",
    "Results",
    "RunTotals",
    "SkipKind",
    "Status",
    "StyleSummary",
    "TokenCount",
    "TokenUsage",
    "has_look_alikes",
    "load_results",
    "new_run_id",
    "stored_recall",
]
