"""The assembled-prompt diff, shown: Markdown for the PR comment and the job summary (trimmed to a
character budget), plain or coloured lines for the terminal, side-by-side rows for the HTML report.

The diff lines come from a pull request (templates, fixtures, tool descriptions), so every form is
made inert here: control and bidi characters removed (no terminal escapes), ``@`` followed by a zero
width joiner (no mention), long lines cut, and in Markdown a code fence longer than any backtick run
inside it, so nothing can close the block and reach the Markdown or HTML around it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from needle_action.compare.diff import section_label
from needle_action.compare.models import CaseDiff, Comparison, DiffHunk, PromptComparison
from needle_action.report import sanitize

LINE_LIMIT = 300  # characters of one diff line shown; the rest is counted
CASE_CHARS = 6_000  # one case's diff in the comment
COMMENT_CHARS = 24_000  # every diff in the comment together
SUMMARY_CASE_CHARS = 60_000
SUMMARY_CHARS = 600_000  # the job summary holds 1 MiB
WHERE_FULL = "the job summary and `report.html` in the report folder (upload it as an artifact)"

_MENTION = re.compile(r"([@＠])(?=[A-Za-z0-9_-])")
_TRAILING = re.compile(r"[ \t]+$")
_BACKTICKS = re.compile(r"`+")


def _trailing(ws: str) -> str:
    return ws.replace(" ", "·").replace("\t", "→")


def shown(line: str, *, limit: int = LINE_LIMIT) -> str:
    """One diff line made inert and its model-visible whitespace visible on changed lines: trailing
    spaces as ``·``, tabs as ``→``, a carriage return as ``␍``, an empty line as ``⏎``."""
    mark, body = line[:1], line[1:]
    body = body.replace("\r", "␍")
    body = (
        sanitize.strip_controls(body).replace("\t", "    ") if mark == " " else sanitize.strip_controls(body)
    )
    if mark in "+-":
        body = _TRAILING.sub(lambda m: _trailing(m.group(0)), body) or "⏎"
        body = body.replace("\t", "→")
    if len(body) > limit:
        body = f"{body[:limit]}… [+{len(body) - limit:,} chars]"
    return mark + _MENTION.sub(lambda m: m.group(1) + sanitize.ZWJ, body)


def hunk_header(h: DiffHunk) -> str:
    section = f" {section_label(h.section)}" if h.section else ""
    return f"@@ -{h.base_start},{h.base_lines} +{h.head_start},{h.head_lines} @@{section}"


def fence_for(lines: Sequence[str]) -> str:
    """A backtick fence longer than any backtick run in LINES (at least three)."""
    longest = max((len(m.group(0)) for line in lines for m in _BACKTICKS.finditer(line)), default=0)
    return "`" * max(3, longest + 1)


@dataclass
class Trimmed:
    """One case's diff lines cut to a character budget, and what was left out."""

    lines: list[str]
    left_lines: int = 0  # changed (+/-) lines not shown
    left_hunks: int = 0


def trim(diff: CaseDiff, budget: int) -> Trimmed:
    """The hunks of DIFF, whole lines, while they fit in BUDGET characters."""
    out = Trimmed(lines=[])
    used = 0
    for i, h in enumerate(diff.hunks):
        for j, line in enumerate([hunk_header(h), *(shown(x) for x in h.lines)]):
            if used + len(line) + 1 > budget:
                rest = h.lines[max(0, j - 1) :]
                out.left_lines += sum(1 for x in rest if x[:1] in "+-")
                out.left_lines += sum(1 for x in diff.hunks[i + 1 :] for y in x.lines if y[:1] in "+-")
                out.left_hunks = len(diff.hunks) - i
                return out
            out.lines.append(line)
            used += len(line) + 1
    return out


def _summary_line(p: PromptComparison, d: CaseDiff) -> str:
    where = f" · {sanitize.code(d.fixture, 60)}" if d.fixture else ""
    sections = ", ".join(sanitize.inline(section_label(s), 40) for s in d.sections) or "request"
    return f"{sanitize.code(p.name, 60)}{where} · {sections} · +{d.added} −{d.removed} lines"


def case_markdown(p: PromptComparison, d: CaseDiff, budget: int) -> str:
    """One case as a collapsed ``<details>`` holding a fenced ``diff`` block of at most BUDGET chars."""
    head = f"<details><summary>Assembled request of {_summary_line(p, d)}</summary>\n\n"
    if not d.hunks:
        return head + f"{sanitize.inline(d.note or 'changed', 300)}\n\n</details>\n"
    t = trim(d, budget)
    fence = fence_for(t.lines)
    body = "\n".join(t.lines)
    text = f"{head}{fence}diff\n{body}\n{fence}\n"
    if t.left_lines or t.left_hunks:
        text += (
            f"\n*{t.left_lines:,} changed line(s) in {t.left_hunks:,} hunk(s) left out here; "
            f"the full diff is in {WHERE_FULL}.*\n"
        )
    if d.note:
        text += f"\n*{sanitize.inline(d.note, 300)}.*\n"
    elif d.partial:
        text += "\n*A side's assembled view was cut to fit the results file: very long lines show their size and hash.*\n"
    return text + "\n</details>\n"


def _changed(c: Comparison) -> Iterator[tuple[PromptComparison, CaseDiff]]:
    for p in c.prompts:
        for d in p.diffs:
            yield p, d


def diffs_markdown(c: Comparison, *, total: int = COMMENT_CHARS, per_case: int = CASE_CHARS) -> str:
    """Every changed request's diff, within TOTAL characters; the cases that do not fit are counted."""
    cases = list(_changed(c))
    if not cases:
        return ""
    parts = ["### Assembled requests that changed\n"]
    used = 0
    for i, (p, d) in enumerate(cases):
        budget = min(per_case, total - used - 400)  # 400: the details, fence and note around it
        if budget < 400:
            left = len(cases) - i
            parts.append(
                f"*{left:,} more changed request(s) not shown here; the full diff is in {WHERE_FULL}.*\n"
            )
            break
        block = case_markdown(p, d, budget)
        parts.append(block)
        used += len(block)
    return "\n".join(parts) + "\n"


# --------------------------------------------------------------------------------- terminal


def terminal_lines(c: Comparison) -> Iterator[tuple[str, str | None]]:
    """(text, colour) per line of every changed request's diff, for ``needle diff`` / ``check``."""
    for p, d in _changed(c):
        fixture = f" [{sanitize.strip_controls(d.fixture)}]" if d.fixture else ""
        sections = ", ".join(section_label(s) for s in d.sections) or "request"
        name = sanitize.strip_controls(p.name)
        yield (
            f"assembled request of {name}{fixture}: {sanitize.strip_controls(sections)} (+{d.added} -{d.removed})",
            "bold",
        )
        if d.note:
            yield f"  {sanitize.strip_controls(d.note)}", None
        for h in d.hunks:
            yield sanitize.strip_controls(hunk_header(h)), "cyan"
            for x in h.lines:
                yield shown(x, limit=500), {"+": "green", "-": "red"}.get(x[:1])


# --------------------------------------------------------------------------------- HTML


@dataclass(frozen=True)
class Row:
    """One row of the side-by-side diff: base on the left, head on the right."""

    kind: str  # "same", "change", "add", "del", "hunk"
    base_no: int | None
    base: str
    head_no: int | None
    head: str


def _pair(hunk: DiffHunk) -> Iterator[Row]:
    b, h = hunk.base_start, hunk.head_start
    dels: list[str] = []
    adds: list[str] = []

    def flush() -> Iterator[Row]:
        nonlocal b, h
        for i in range(max(len(dels), len(adds))):
            left = dels[i] if i < len(dels) else None
            right = adds[i] if i < len(adds) else None
            kind = "change" if left is not None and right is not None else ("del" if right is None else "add")
            yield Row(
                kind,
                b if left is not None else None,
                left or "",
                h if right is not None else None,
                right or "",
            )
            b += left is not None
            h += right is not None
        dels.clear()
        adds.clear()

    for x in hunk.lines:
        if x[:1] == "-":
            dels.append(shown(x, limit=2_000)[1:])
        elif x[:1] == "+":
            adds.append(shown(x, limit=2_000)[1:])
        else:
            yield from flush()
            text = shown(x, limit=2_000)[1:]
            yield Row("same", b, text, h, text)
            b, h = b + 1, h + 1
    yield from flush()


def side_by_side(d: CaseDiff) -> list[Row]:
    """The rows of D for the HTML report (text escaped by the template's autoescape)."""
    rows: list[Row] = []
    for hunk in d.hunks:
        rows.append(Row("hunk", None, sanitize.strip_controls(hunk_header(hunk)), None, ""))
        rows.extend(_pair(hunk))
    return rows


__all__ = [
    "COMMENT_CHARS",
    "Row",
    "case_markdown",
    "diffs_markdown",
    "fence_for",
    "shown",
    "side_by_side",
    "terminal_lines",
    "trim",
]
