"""The budget half of a results file: one case's token count, its assembled view, its verdict."""

from __future__ import annotations

import hashlib
from typing import Annotated

from pydantic import (
    BeforeValidator,
    Field,
    PlainSerializer,
)

from needle_action.config.model import Growth, parse_growth
from needle_action.results.base import Model, Status


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
    def of(cls, full: str) -> AssembledView:
        """FULL (a request's view, context collapsed: ``request.view.request_view``), capped."""
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
    same_request_as: str | None = Field(
        default=None,
        description="an earlier fixture of this prompt whose assembled request is the same as this "
        "case's: nothing that differs between the two fixtures reaches the request",
    )
    sections: dict[str, int] | None = Field(
        default=None,
        description="tokens by section: system, tools, messages, context, params (they add up to "
        "count.tokens; each is the difference it makes to the count, see docs/tokens.md)",
    )
    assembled: AssembledView | None = Field(
        default=None, description="the labelled view of the request the compare stage diffs"
    )
