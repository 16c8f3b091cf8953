"""Positional recall: needles placed in the user's own prompt shape, asked for, answered, counted.

The stages above (``compare``, ``report``) use recall through the names below, never through its
submodules: the statistics (``stats``), the cell groups (``groups``), the base's pooled history
(``history``), the power design (``power``), the diagnosis grid (``diagnose``) and the reorder
advice (``reorder``) stay free to change shape behind them (``.importlinter`` holds the rule).

The names load on first use (PEP 562), as in :mod:`needle_action.assemble`: importing one recall
module must not pull in the scheduler and the providers behind it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from needle_action.recall.diagnose import read_grid
    from needle_action.recall.groups import CellKey, Estimate, Group, cell_key, family, planning_group, pooled
    from needle_action.recall.history import base_counts, testable_counts
    from needle_action.recall.power import GroupDesign, detectable_drop
    from needle_action.recall.reorder import describe as describe_reorder
    from needle_action.recall.sequential import (
        Decision,
        Design,
        GroupResult,
        PromptData,
        answers_line_up,
        family_size,
        replay,
        result_answers,
    )
    from needle_action.recall.stats import holm_rejections, stratified_drop_pvalue, wilson_interval

# public name -> (module, its name there)
_LAZY = {
    "read_grid": ("needle_action.recall.diagnose", "read_grid"),
    "CellKey": ("needle_action.recall.groups", "CellKey"),
    "Estimate": ("needle_action.recall.groups", "Estimate"),
    "Group": ("needle_action.recall.groups", "Group"),
    "cell_key": ("needle_action.recall.groups", "cell_key"),
    "family": ("needle_action.recall.groups", "family"),
    "planning_group": ("needle_action.recall.groups", "planning_group"),
    "pooled": ("needle_action.recall.groups", "pooled"),
    "base_counts": ("needle_action.recall.history", "base_counts"),
    "testable_counts": ("needle_action.recall.history", "testable_counts"),
    "GroupDesign": ("needle_action.recall.power", "GroupDesign"),
    "detectable_drop": ("needle_action.recall.power", "detectable_drop"),
    "describe_reorder": ("needle_action.recall.reorder", "describe"),
    "Decision": ("needle_action.recall.sequential", "Decision"),
    "Design": ("needle_action.recall.sequential", "Design"),
    "GroupResult": ("needle_action.recall.sequential", "GroupResult"),
    "PromptData": ("needle_action.recall.sequential", "PromptData"),
    "answers_line_up": ("needle_action.recall.sequential", "answers_line_up"),
    "family_size": ("needle_action.recall.sequential", "family_size"),
    "replay": ("needle_action.recall.sequential", "replay"),
    "result_answers": ("needle_action.recall.sequential", "result_answers"),
    "holm_rejections": ("needle_action.recall.stats", "holm_rejections"),
    "stratified_drop_pvalue": ("needle_action.recall.stats", "stratified_drop_pvalue"),
    "wilson_interval": ("needle_action.recall.stats", "wilson_interval"),
}


def __getattr__(name: str) -> Any:
    """Load a public name on first use (PEP 562), then keep it as a plain attribute."""
    where = _LAZY.get(name)
    if where is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(where[0]), where[1])
    globals()[name] = value
    return value


__all__ = [
    "CellKey",
    "Decision",
    "Design",
    "Estimate",
    "Group",
    "GroupDesign",
    "GroupResult",
    "PromptData",
    "answers_line_up",
    "base_counts",
    "cell_key",
    "describe_reorder",
    "detectable_drop",
    "family",
    "family_size",
    "holm_rejections",
    "planning_group",
    "pooled",
    "read_grid",
    "replay",
    "result_answers",
    "stratified_drop_pvalue",
    "testable_counts",
    "wilson_interval",
]
