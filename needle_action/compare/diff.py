"""What changed in the request the model receives: the assembled view, base vs head, as a unified
diff labelled by section, and the token change named by the section that moved most.

Reads results only (``BudgetCase.assembled``, written by the measuring side), so it works the same
with a base measured in a worktree or read from the data branch. The report decides how much of it
fits where (docs/comment.md#assembled-prompt-diff).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Sequence

from needle_action.compare.models import CaseDiff, DiffHunk, PromptComparison, TokenDelta
from needle_action.results import BudgetCase

CONTEXT_LINES = 3
# one case's hunks kept in the comparison (comparison.json travels as an artifact with a size cap)
MAX_DIFF_CHARS = 250_000
# a section heading of the view: "--- system ---", "--- tool_use search ---", "--- params ---"
_HEADING = re.compile(r"^--- (.{1,80}) ---$")
SECTION_LABEL = {"params": "parameters"}


def _headings(lines: Sequence[str]) -> list[str]:
    """The section each line is in (the last heading at or above it; "" before the first)."""
    out, current = [], ""
    for line in lines:
        m = _HEADING.match(line)
        if m:
            current = m.group(1)
        out.append(current)
    return out


def _hunk(
    group: list[tuple[str, int, int, int, int]], base: list[str], head: list[str], where: dict[str, list[str]]
) -> DiffHunk:
    lines: list[str] = []
    section: str | None = None
    for tag, b1, b2, h1, h2 in group:
        if tag == "equal":
            lines.extend(" " + x for x in base[b1:b2])
            continue
        if section is None:  # named by its first change: the head's section, or the base's for a removal
            section = where["head"][h1] if h2 > h1 else where["base"][b1]
        lines.extend("-" + x for x in base[b1:b2])
        lines.extend("+" + x for x in head[h1:h2])
    first, last = group[0], group[-1]
    return DiffHunk(
        section=section or "",
        base_start=first[1] + 1,
        base_lines=last[2] - first[1],
        head_start=first[3] + 1,
        head_lines=last[4] - first[3],
        lines=lines,
    )


def _within(hunks: Sequence[DiffHunk], limit: int) -> int:
    """How many hunks, from the first, fit in LIMIT characters."""
    size = 0
    for i, h in enumerate(hunks):
        size += sum(len(x) + 1 for x in h.lines)
        if size > limit:
            return i
    return len(hunks)


def diff_lines(fixture: str | None, base_text: str, head_text: str, *, partial: bool = False) -> CaseDiff:
    """The unified diff of two views, hunk by hunk, each named by the section it changes."""
    base, head = base_text.split("\n"), head_text.split("\n")
    where = {"base": _headings(base), "head": _headings(head)}
    # autojunk (lines in over 1% of a long view are not anchors) keeps a view of 100,000 blank lines
    # from making the match quadratic
    matcher = difflib.SequenceMatcher(a=base, b=head)
    groups = list(matcher.get_grouped_opcodes(CONTEXT_LINES))
    hunks = [_hunk(g, base, head, where) for g in groups]
    kept = _within(hunks, MAX_DIFF_CHARS)
    note = f"{len(hunks) - kept} more hunk(s) not kept: the diff is too large" if kept < len(hunks) else None
    touched = [  # every section a changed line is in, in view order
        name
        for g in groups
        for tag, b1, b2, h1, h2 in g
        if tag != "equal"
        for name in [*where["base"][b1:b2], *where["head"][h1:h2]]
    ]
    added = sum(1 for h in hunks for x in h.lines if x.startswith("+"))
    removed = sum(1 for h in hunks for x in h.lines if x.startswith("-"))
    return CaseDiff(
        fixture=fixture,
        sections=list(dict.fromkeys(touched)),
        added=added,
        removed=removed,
        hunks=hunks[:kept],
        partial=partial or note is not None,
        note=note,
    )


def case_diff(head: BudgetCase | None, base: BudgetCase | None) -> CaseDiff | None:
    """The diff of one prompt x fixture whose assembled request changed; None when it did not, or
    when one side has no case (a new or removed fixture is not a change of a request)."""
    if head is None or base is None or head.content_hash == base.content_hash:
        return None
    hv, bv = head.assembled, base.assembled
    if hv is None or bv is None:
        side = "base" if bv is None else "head"
        return CaseDiff(
            fixture=head.fixture,
            note=f"the request changed, but the {side} results carry no assembled view (written by an older needle)",
        )
    if hv.sha256 == bv.sha256:
        return None  # same view: the change is outside it (e.g. the context text, collapsed)
    if hv.text == bv.text:
        return CaseDiff(fixture=head.fixture, partial=True, note="the change is in a part too long to store")
    return diff_lines(head.fixture, bv.text, hv.text, partial=hv.truncated or bv.truncated)


def section_label(name: str) -> str:
    return SECTION_LABEL.get(name, name)


def _compared(tokens: Iterable[TokenDelta]) -> list[TokenDelta]:
    return [t for t in tokens if t.delta is not None and t.base_tokens is not None]


def token_change(prompts: Sequence[PromptComparison]) -> str | None:
    """``+412 tokens, 380 of them in tools``: the net change over the cases both sides measured, and
    the section that moved most in the same direction (when the counter split them)."""
    cases = [t for p in prompts for t in _compared(p.tokens) if t.delta]
    total = sum(t.delta or 0 for t in cases)
    if not cases or total == 0:
        return None
    by_section: dict[str, int] = {}
    for t in cases:
        for name, d in t.section_deltas().items():
            by_section[name] = by_section.get(name, 0) + d
    over = f" over {len(cases)} cases" if len(cases) > 1 else ""
    text = f"{total:+,} tokens{over}"
    sign = 1 if total > 0 else -1
    moved = {n: d * sign for n, d in by_section.items() if d * sign > 0}
    if moved:
        name = max(moved, key=lambda n: moved[n])
        text += f", {moved[name]:,} of them {'in' if sign > 0 else 'from'} {section_label(name)}"
    return text


__all__ = ["case_diff", "diff_lines", "section_label", "token_change"]
