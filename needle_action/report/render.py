"""The PR comment and the job summary, rendered from a Comparison with Jinja2 templates.

Every value a template prints goes through :func:`~needle_action.report.sanitize.inline` via the
environment's ``finalize`` hook: nothing from a pull request (names, paths, fixtures, model answers)
can reach the Markdown unescaped, even if a template forgets a filter. Text our own code builds
(emoji, numbers formatted here) is wrapped in :class:`Trusted` to skip that step.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import jinja2

from needle_action.compare import CellDelta, Comparison, PromptComparison, RecallComparison, TokenDelta
from needle_action.compare.diff import section_label
from needle_action.report import charts, sanitize
from needle_action.report import diff as diff_md
from needle_action.report.reorder import describe_reorder
from needle_action.results import has_look_alikes

MARKER = "<!-- needle-action:comment -->"
_BLANKS = re.compile(r"\n{3,}")
GITHUB_COMMENT_LIMIT = 65536
TEMPLATES = Path(__file__).parent / "templates"

TIER_EMOJI = {"green": "🟢", "yellow": "🟡", "red": "🔴"}
STATUS_LABEL = {
    "new": "new",
    "deleted": "deleted",
    "renamed": "renamed",
    "changed": "changed",
    "unchanged": "",
}
VERDICT_LABEL = {
    "ok": "ok",
    "regressed": "**regressed**",
    "improved": "improved",
    "inconclusive": "inconclusive",
    "below-threshold": "**below threshold**",
    "new": "new",
    "removed": "removed",
    "not-run": "not run",
    "below-floor": "ok (below the floor)",
    "untested": "not tested",
}
DIAGNOSIS_LABEL = {
    "all-pass": "All pass",
    "lost-in-the-middle": "Lost in the middle",
    "size-limited": "Size-limited",
    "flaky": "Flaky",
    "inconclusive": "Inconclusive",
    "mixed-failure": "Mixed failure",
    "hallucination": "Hallucination",
}
# what each needle style's grid measures, under its name (docs/needles.md has the long version)
STYLE_NOTE = {
    "gold": "the fixture's own gold item, moved",
    "nonlexical": "no word shared with the question",
    "absent": "the answer is not in the context: 🟩 = the model says so",
}
# detail levels, richest first; the comment drops to the next one while it is too long
LEVELS = ("full", "no-answers", "no-cells", "changed-only", "minimal")


class Trusted(str):
    """Markdown produced by this module; printed as is."""


def _finalize(value: object) -> object:
    if isinstance(value, Trusted):
        return value
    if isinstance(value, str):
        return sanitize.inline(value, limit=600)
    if value is None:
        return ""
    return value


_SQUARES = {"pass": "🟩", "near": "🟨", "fail": "🟥", "none": "⬜"}


def square(rate: float | None, threshold: float | None, trials: int | None) -> str:
    """🟩 at or above the threshold, 🟨 within 0.2 below it, 🟥 lower, ⬜ not run."""
    return _SQUARES[charts.cell_tier(rate, threshold, trials)]


# format specs by (a float?, signed?): a delta keeps one decimal, a plain float two; ints separated
_SPECS = {(True, True): "+.1f", (False, True): "+,", (True, False): ",.2f", (False, False): ","}


def _number(n: int | float | None, *, signed: bool, suffix: str = "") -> Trusted:
    """N as the comment's tables show it; "–" when there is none."""
    if n is None:
        return Trusted("–")
    return Trusted(f"{n:{_SPECS[isinstance(n, float), signed]}}{suffix}")


def _signed(n: int | float | None, suffix: str = "") -> Trusted:
    return _number(n, signed=True, suffix=suffix)


def _pts(drop: float | None) -> Trusted:
    """A rate drop (base - head, 0..1) shown as the head's change in percentage points."""
    if drop is None:
        return Trusted("–")
    change = round(-drop * 100)
    return Trusted("±0 pt" if change == 0 else f"{change:+d} pt")


def _num(n: int | float | None) -> Trusted:
    return _number(n, signed=False)


def _rate(r: float | None) -> Trusted:
    return Trusted("–") if r is None else Trusted(f"{r:.0%}")


def _depth(d: float) -> Trusted:
    return Trusted(f"{d:g}")


def _delta_cell(t: TokenDelta) -> Trusted:
    if t.delta is None:
        return Trusted("new" if t.base_tokens is None and t.head_tokens is not None else "–")
    pct = f" ({t.percent:+.1f}%)" if t.percent is not None else ""
    return Trusted(f"{t.delta:+,}{pct}")


def _heat_cell(c: CellDelta | None, rc: RecallComparison, with_base: bool) -> Trusted:
    if c is None:
        return Trusted("⬜")
    head = square(c.head_rate, rc.threshold, c.head_trials)
    mark = (
        " ‼️"
        if c.verdict in ("regressed", "below-threshold")
        else (" ❔" if c.verdict == "inconclusive" else "")
    )
    if not with_base:
        return Trusted(head + mark)
    base = square(c.base_rate, rc.threshold, c.base_trials)
    return Trusted(f"{base}→{head}{mark}")


def _share(part: int, whole: int, base: float | None = None) -> str:
    text = f"{part}/{whole} ({part / whole:.0%})" if whole else "–"
    return text + (f", base {base:.0%}" if base is not None else "")


def _worst(rc: RecallComparison, style: str) -> str:
    """``, worst 40% at depth 0.5 of 8,000 tokens``: the absent cell that invents answers most."""
    rated = [
        ((c.head_trials - (c.head_hits or 0)) / c.head_trials, c)
        for c in rc.cells
        if c.style == style and c.head_trials
    ]
    if not rated:
        return ""
    rate, worst = max(rated, key=lambda rc_: rc_[0])
    return f", worst {rate:.0%} at depth {worst.depth:g} of {worst.size:,} tokens" if rate else ""


def _style_caption(rc: RecallComparison, style: str) -> Trusted:
    """``codeword`` needle · recall 56/60 (93%) · answered a look-alike's value in 2/60 (3%)."""
    name = f"**{sanitize.code(style, 40)}** needle"
    if style in STYLE_NOTE:
        name += f" ({STYLE_NOTE[style]})"
    parts = [name]
    head = rc.head.style(style) if rc.head is not None else None
    base = rc.base.style(style) if rc.base is not None and rc.comparable else None
    if head is not None:
        if head.hallucination_rate is not None:
            before = base.hallucination_rate if base is not None else None
            parts.append(
                f"hallucination {_share(head.trials - head.hits, head.trials, before)}{_worst(rc, style)}"
            )
        else:
            parts.append(f"recall {_share(head.hits, head.trials, base.rate if base is not None else None)}")
        if head.distractor_answers or (rc.head is not None and has_look_alikes(style, rc.head.distractors)):
            parts.append(f"answered a look-alike's value in {_share(head.distractor_answers, head.trials)}")
        if head.tool_call_answers:
            parts.append(f"answered with a tool call in {_share(head.tool_call_answers, head.trials)}")
    return Trusted(" · ".join(parts))


# characters of assembled-request diffs per detail level (the comment's other parts come first)
DIFF_CHARS = {"full": 24_000, "no-answers": 16_000, "no-cells": 10_000, "changed-only": 6_000, "minimal": 0}
SECTIONS = ("system", "tools", "messages", "context", "params")


def _diffs(c: Comparison, level: str) -> Trusted:
    """The assembled-request diffs within the level's share of the comment ("summary": all of it)."""
    if level == "summary":
        return Trusted(
            diff_md.diffs_markdown(c, total=diff_md.SUMMARY_CHARS, per_case=diff_md.SUMMARY_CASE_CHARS)
        )
    total = DIFF_CHARS.get(level, 0)
    if total:
        return Trusted(diff_md.diffs_markdown(c, total=total, per_case=min(diff_md.CASE_CHARS, total)))
    n = sum(len(p.diffs) for p in c.prompts)
    if not n:
        return Trusted("")
    return Trusted(f"*{n:,} assembled request(s) changed: the diffs are in {diff_md.WHERE_FULL}.*\n")


def _section_delta(n: int | None) -> Trusted:
    return Trusted("–" if n is None else ("±0" if n == 0 else f"{n:+,}"))


def _midline(value: object) -> Trusted:
    """Sanitised text printed inside a line (a headline's tail): a leading sign needs no escape there."""
    text = sanitize.inline(value, 200)
    return Trusted(text[1:] if text[:2] in ("\\+", "\\-") else text)


def section_rows(c: Comparison) -> list[tuple[PromptComparison, TokenDelta, list[Trusted]]]:
    """(prompt, case, signed delta per section) for the changed cases whose sections were counted."""
    rows = []
    for p in c.prompts:
        for t in p.tokens:
            deltas = t.section_deltas()
            if deltas and t.delta:
                rows.append((p, t, [_section_delta(deltas.get(n)) for n in SECTIONS]))
    return rows


def _misses(rc: RecallComparison) -> Trusted:
    """Each failing group's sampled misses: depth, expected answer, the reply, a base hit beside."""
    lines = []
    for g in rc.misses:
        style = f"{sanitize.code(g.style, 40)}, " if g.style else ""
        lines.append(f"**How it missed** ({style}{sanitize.inline(g.label, 80)}):\n")
        for m in g.misses:
            base = (
                f" · base at this cell answered {sanitize.code_span(m.base_hit)}"
                if m.base_hit is not None
                else ""
            )
            lines.append(
                f"- depth {m.depth:g} of {m.size:,} tokens: expected {sanitize.code_span(m.expected)}, "
                f"answered {sanitize.code_span(m.answer)}{base}"
            )
        lines.append("")
    return Trusted("\n".join(lines))


def _money(x: float | None) -> Trusted:
    return Trusted("$0" if not x else f"${x:,.4f}")


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATES)),
        autoescape=False,  # noqa: S701 - Markdown, not HTML; finalize sanitises instead
        finalize=_finalize,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        undefined=jinja2.StrictUndefined,
        extensions=["jinja2.ext.loopcontrols"],
    )
    env.filters.update(
        code=lambda v, limit=120: Trusted(sanitize.code(v, limit)),
        text=lambda v, limit=300: Trusted(sanitize.inline(v, limit)),
        signed=_signed,
        pts=_pts,
        num=_num,
        rate=_rate,
        depth=_depth,
        money=_money,
        delta=_delta_cell,
        trusted=Trusted,
        tier=lambda t: Trusted(TIER_EMOJI[t]),
        verdict=lambda v: (
            Trusted(VERDICT_LABEL[v]) if v in VERDICT_LABEL else Trusted(sanitize.inline(v, 40))
        ),
        diagnosis=lambda k: (
            Trusted(DIAGNOSIS_LABEL[k]) if k in DIAGNOSIS_LABEL else Trusted(sanitize.inline(k, 40))
        ),
        short=lambda sha: Trusted(sanitize.code((sha or "")[:7])) if sha else Trusted("–"),
    )
    env.globals.update(
        heat=_heat_cell,
        square=square,
        style_caption=_style_caption,
        MARKER=Trusted(MARKER),
        STATUS_LABEL=STATUS_LABEL,
        diffs=_diffs,
        midline=_midline,
        section_rows=section_rows,
        section_names=[Trusted(section_label(n)) for n in SECTIONS],
        misses=_misses,
    )
    # the Mermaid chart of a changed prompt's recall by depth (report/charts.py: names made safe there)
    env.globals["depth_chart"] = lambda p: Trusted(charts.comment_chart(p))
    env.globals["trend_chart"] = lambda t: Trusted(charts.comment_trend(t))
    # numbers and our own words; style names (from the file) go through the code-span sanitiser
    env.globals["reorder_line"] = lambda rows: Trusted(describe_reorder(rows, lambda s: sanitize.code(s, 40)))
    return env


_ENV: jinja2.Environment | None = None


def env() -> jinja2.Environment:
    global _ENV
    if _ENV is None:
        _ENV = _environment()
    return _ENV


def _render(name: str, comparison: Comparison, **ctx: Any) -> str:
    text = env().get_template(name).render(c=comparison, **ctx)
    return _BLANKS.sub("\n\n", text)  # template whitespace, not content: at most one blank line


def render_comment(
    comparison: Comparison,
    *,
    summary_url: str | None = None,
    max_chars: int = GITHUB_COMMENT_LIMIT,
    notes: list[str] | None = None,
) -> str:
    """The sticky PR comment; starts with MARKER; at most MAX_CHARS characters.

    When the full comment is too long, detail sections are dropped level by level (answers, cell
    tables, unchanged prompts) and the comment points to the job summary, which always has it all.
    """
    url = Trusted(summary_url) if summary_url and summary_url.startswith(("https://", "http://")) else None
    extra = list(notes or [])
    for level in LEVELS:
        text = _render(
            "comment.md.j2",
            comparison,
            level=level,
            summary_url=url,
            extra_notes=extra,
            trimmed=level != "full",
        )
        if len(text) <= max_chars:
            return text
    # still too long (hundreds of prompts): hard cut on a line boundary, keep the pointer
    tail = "\n\n… (cut to fit GitHub's comment limit) " + (
        f"[Full report in the job summary]({url})\n" if url else "The full report is in the job summary.\n"
    )
    budget = max(0, max_chars - len(tail))
    cut = text[:budget]
    cut = cut[: cut.rfind("\n")] if "\n" in cut else cut
    return cut + tail


def render_summary(comparison: Comparison, *, notes: list[str] | None = None) -> str:
    """The fuller report for GITHUB_STEP_SUMMARY (no size pressure below GitHub's 1 MiB)."""
    return _render(
        "summary.md.j2",
        comparison,
        level="full",
        summary_url=None,
        extra_notes=list(notes or []),
        trimmed=False,
    )
