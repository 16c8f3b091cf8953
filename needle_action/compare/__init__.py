"""Base vs head: what changed, and is it bad enough to block the pull request?"""

from needle_action.compare.models import (
    AnswerSample,
    CellDelta,
    Comparison,
    Failure,
    GroupDelta,
    PromptComparison,
    RecallComparison,
    RecallSide,
    SideTotals,
    StyleLine,
    TokenDelta,
)
from needle_action.compare.verdict import compare

__all__ = [
    "AnswerSample",
    "CellDelta",
    "Comparison",
    "Failure",
    "GroupDelta",
    "PromptComparison",
    "RecallComparison",
    "RecallSide",
    "SideTotals",
    "StyleLine",
    "TokenDelta",
    "compare",
]
