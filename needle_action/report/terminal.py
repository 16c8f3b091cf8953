"""Tables for the CLI (plain click; no table library)."""

from __future__ import annotations

import sys
import unicodedata
from collections.abc import Callable
from pathlib import PurePosixPath
from typing import TextIO

import click

from needle_action.compare import Comparison, RecallComparison
from needle_action.compare.diff import section_label
from needle_action.compare.models import PromptTrend
from needle_action.report.diff import terminal_lines as diff_lines
from needle_action.results import (
    BudgetCase,
    RecallCell,
    RecallPower,
    RecallResult,
    Results,
    TokenUsage,
    has_look_alikes,
)

# ---------------------------------------------------------------------------------- budget table

_BUDGET_HEADERS = ("prompt", "fixture", "tokens", "reserve", "budget", "headroom", "base", "delta", "status")
_RIGHT_ALIGNED = {"tokens", "reserve", "budget", "headroom", "base", "delta"}
_STATUS_COLOUR = {"pass": "green", "fail": "red", "error": "red", "skipped": "yellow", "partial": "yellow"}


def _n(value: int | None) -> str:
    return "-" if value is None else f"{value:,}"


def _tokens_cell(case: BudgetCase) -> str:
    """``1,234`` exact; ``~1,234`` approximate; ``~1,420 (x1.15)`` with a safety factor."""
    c = case.count
    text = f"{c.tokens:,}" if c.exact else f"~{c.tokens:,}"
    if c.safety_factor != 1.0:
        text += f" (x{c.safety_factor:g})"
    return text


def _delta_cell(case: BudgetCase) -> str:
    if case.growth_tokens is None:
        return "new" if case.baseline_tokens is None else "-"
    text = f"{case.growth_tokens:+,}"
    if case.growth_percent is not None:
        text += f" ({case.growth_percent:+.1f}%)"
    return text


def _fixture_name(fixture: str | None) -> str:
    return PurePosixPath(fixture).name if fixture else "(none)"


def budget_rows(results: Results, *, with_baseline: bool) -> list[tuple[dict[str, str], str]]:
    """One (cells, status) per prompt x fixture; ``delta`` is ``new`` only when a baseline was given."""
    rows = []
    for p in results.prompts:
        if p.error and not p.cases:
            rows.append(({"prompt": p.name, "fixture": "-"}, "error"))
            continue
        for case in p.cases:
            delta = _delta_cell(case)
            if delta == "new" and not with_baseline:
                delta = "-"
            cells = {
                "prompt": p.name,
                "fixture": _fixture_name(case.fixture),
                "tokens": _tokens_cell(case),
                "reserve": _n(case.reserve_output_tokens),
                "budget": _n(case.max_input_tokens),
                "headroom": _n(case.headroom),
                "base": _n(case.baseline_tokens),
                "delta": delta,
            }
            rows.append((cells, case.status))
    return rows


REPEAT_NOTE = (
    "nothing that differs between the two fixtures reaches the request: check their keys against the "
    "variables the template reads"
)


def print_budget(results: Results) -> None:
    """An aligned table per prompt x fixture, the reasons for each failure, and a summary line."""
    cases = [c for p in results.prompts for c in p.cases]
    with_baseline = any(c.baseline_tokens is not None for c in cases)
    rows = budget_rows(results, with_baseline=with_baseline)
    if not rows:
        click.echo("no prompts to check")
        return

    table = [(dict(cells, status=status.upper()), status) for cells, status in rows]
    widths = {h: max(len(h), *(len(cells.get(h, "")) for cells, _ in table)) for h in _BUDGET_HEADERS}

    def line(cells: dict[str, str], status: str | None = None) -> str:
        parts = []
        for h in _BUDGET_HEADERS:
            text = cells.get(h, "")
            if h in _RIGHT_ALIGNED:
                text = text.rjust(widths[h])
            elif h != _BUDGET_HEADERS[-1]:  # no trailing padding after the last column
                text = text.ljust(widths[h])
            if h == "status" and status is not None:  # pad first: ANSI codes have no width
                text = click.style(text, fg=_STATUS_COLOUR.get(status), bold=status != "pass")
            parts.append(text)
        return "  ".join(parts).rstrip()

    click.echo(click.style(line({h: h for h in _BUDGET_HEADERS}), bold=True))
    click.echo("  ".join("-" * widths[h] for h in _BUDGET_HEADERS))
    for cells, status in table:
        click.echo(line(cells, status))

    _print_sections(results)
    _print_case_notes(results)
    click.echo("")
    click.echo(_budget_summary(results))


def _print_case_notes(results: Results) -> None:
    """Under the budget table: why each failing case failed, where an "auto" budget came from, and
    the fixtures whose request an earlier fixture's already is."""
    problems = [
        (p.name, case.fixture, reason) for p in results.prompts for case in p.cases for reason in case.reasons
    ]
    problems += [(p.name, None, p.error) for p in results.prompts if p.error]
    if problems:
        click.echo("")
        for name, fixture, reason in problems:
            where = f"{name} [{_fixture_name(fixture)}]" if fixture else name
            click.echo(f"  {click.style('x', fg='red')} {where}: {reason}")
    sources = dict.fromkeys(
        (p.name, c.budget_source) for p in results.prompts for c in p.cases if c.budget_source
    )
    for name, source in sources:  # max_input_tokens = "auto": where the number came from, or why none
        click.echo(f"  {name}: max_input_tokens {source}")
    for p in results.prompts:
        for c in p.cases:
            if c.same_request_as:
                same = f"the same request as [{_fixture_name(c.same_request_as)}]"
                click.echo(
                    f"  {click.style('!', fg='yellow')} {p.name} [{_fixture_name(c.fixture)}]: {same}: {REPEAT_NOTE}"
                )


SECTION_ORDER = ("system", "tools", "messages", "context", "params")


def _print_sections(results: Results) -> None:
    """Where the tokens are, for the cases that carry tools or parameters or that changed against
    the base: ``rag [typical.yaml]: system 120 · tools 1,450 · messages 300 · context 2,000``."""
    shown = [
        (p.name, c)
        for p in results.prompts
        for c in p.cases
        if c.sections and (c.sections.get("tools") or c.sections.get("params") or c.growth_tokens)
    ]
    if not shown:
        return
    click.echo("")
    click.echo("  tokens by section:")
    for name, case in shown:
        sections = case.sections or {}
        parts = " · ".join(f"{k} {sections.get(k, 0):,}" for k in SECTION_ORDER)
        where = f"{name} [{_fixture_name(case.fixture)}]" if case.fixture else name
        click.echo(f"  {where}: {parts}")


def _kind(model: str | None, exact: bool) -> str:
    """How a count was made: exact; an estimate (Claude counted offline: its documented overheads
    added to another tokenizer's count); approximate (another model's tokenizer)."""
    if exact:
        return "exact"
    return "estimate" if "claude" in (model or "").lower() else "approximate"  # as tokens.is_claude


def _budget_summary(results: Results) -> str:
    cases = [c for p in results.prompts for c in p.cases]
    failed = sum(c.status == "fail" for c in cases)
    errors = sum(c.status == "error" for c in cases) + sum(1 for p in results.prompts if p.error)
    counters = sorted(
        {
            (c.count.counter, c.count.exact, c.count.safety_factor, _kind(p.model, c.count.exact))
            for p in results.prompts
            for c in p.cases
        }
    )
    how = ", ".join(
        f"{name} ({kind}{f', x{f:g} safety factor' if f != 1.0 else ''})" for name, _, f, kind in counters
    )
    verdict = results.budget_status
    head = click.style(f"budget {verdict.upper()}", fg=_STATUS_COLOUR.get(verdict), bold=True)
    text = (
        f"{head}: {len(cases)} case{'s' if len(cases) != 1 else ''} in {len(results.prompts)} "
        f"prompt{'s' if len(results.prompts) != 1 else ''}, {len(cases) - failed - errors} passed, {failed} failed"
    )
    if errors:
        text += f", {errors} error{'s' if errors != 1 else ''}"
    if how:
        text += f"; counted with {how}"
    if any(not c.count.exact for c in cases):
        text += "; ~ = approximate"
    return text


# ---------------------------------------------------------------------------------- recall grid

_CELL_MARK = {"pass": ("✓", "green"), "fail": ("✗", "red"), "undecided": ("?", "yellow")}
_DIAG_COLOUR = {"all-pass": "green", "flaky": "yellow", "inconclusive": "yellow"}


def _plain(text: str, limit: int = 60) -> str:
    """A model answer made safe for a terminal: no escape sequences or control characters, one
    line, bounded (answers are untrusted: a model can be talked into emitting ANSI codes)."""

    flat = " ".join((text or "").split())
    flat = "".join(ch for ch in flat if unicodedata.category(ch) not in ("Cc", "Cf", "Cs", "Co"))
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _recall_cell(cell: RecallCell) -> tuple[str, str | None]:
    mark, colour = _CELL_MARK[cell.status]
    if cell.trials == 0:
        return f"{mark} not run", colour
    star = "*" if cell.stopped_early else " "
    return f"{mark} {cell.hits}/{cell.trials}{star} {cell.ci_low * 100:.0f}-{cell.ci_high * 100:.0f}%", colour


_STYLE_NOTE = {
    "gold": "the fixture's own gold item, moved",
    "nonlexical": "no word shared with the question",
    "absent": "the answer is not in the context; a hit is the model saying so",
}


def _share(part: int, whole: int) -> str:
    return f"{part}/{whole} ({part / whole:.0%})" if whole else "-"


def _style_heading(r: RecallResult, style: str) -> str:
    """``codeword needle: recall 56/60 (93%), answered a look-alike's value in 2/60 (3%)``."""
    note = f" ({_STYLE_NOTE[style]})" if style in _STYLE_NOTE else ""
    line = f"  {click.style(style, bold=True)} needle{note}"
    summary = next((x for x in r.styles if x.style == style), None)
    if summary is None:
        return line
    if summary.hallucination_rate is not None:
        line += f": hallucination {_share(summary.trials - summary.hits, summary.trials)}"
    else:
        line += f": recall {_share(summary.hits, summary.trials)}"
    if summary.distractor_answers or has_look_alikes(style, r.distractors):
        line += f", answered a look-alike's value in {_share(summary.distractor_answers, summary.trials)}"
    if summary.tool_call_answers:
        line += f", answered with a tool call in {_share(summary.tool_call_answers, summary.trials)}"
    if len(r.styles) > 1 and summary.hallucination_rate is None:
        eff = summary.effective_context
        line += f", effective context {f'{eff:,} tokens' if eff else 'below the smallest size'}"
    return line


def _print_grid(r: RecallResult, style: str) -> None:
    """The size x depth grid of one style: verdicts, needle offsets, and for absent the hallucination
    rate of every cell."""
    cells = [c for c in r.cells if c.style == style]
    sizes = sorted({c.size for c in cells})
    depths = sorted({c.depth for c in cells})
    grid = {(c.size, c.depth): c for c in cells}
    texts = {k: _recall_cell(c) for k, c in grid.items()}
    width = max([len(t) for t, _ in texts.values()] + [len("100%"), 10])
    size_w = max(len("size \\ depth"), len("hallucinated"), *(len(f"{s:,} tok") for s in sizes))
    click.echo(_style_heading(r, style))
    click.echo(
        "  " + "size \\ depth".ljust(size_w) + "  " + "  ".join(f"{d:.0%}".ljust(width) for d in depths)
    )
    for s in sizes:
        row = []
        for d in depths:
            text, colour = texts.get((s, d), ("-", None))
            row.append(click.style(text.ljust(width), fg=colour))
        click.echo("  " + f"{s:,} tok".ljust(size_w) + "  " + "  ".join(row).rstrip())
        absent = bool(cells) and cells[0].abstention
        at = "near miss at" if absent else "needle at"
        extra: list[tuple[str, Callable[[RecallCell], str | None]]] = [
            (at, lambda c: None if c.token_offset is None else f"@{c.token_offset:,}")
        ]
        if absent:
            extra.append(
                (
                    "hallucinated",
                    lambda c: None if c.hallucination_rate is None else f"{c.hallucination_rate:.0%}",
                )
            )
        for label, show in extra:
            values = [show(grid[(s, d)]) if (s, d) in grid else None for d in depths]
            if any(v is not None for v in values):
                line = "  ".join((v or "-").ljust(width) for v in values)
                click.echo(click.style("  " + label.rjust(size_w) + "  " + line.rstrip(), dim=True))


def _print_recall_prompt(name: str, r: RecallResult) -> None:
    head = click.style(f"recall {name}", bold=True)
    fixture = f" · fixture {_fixture_name(r.fixture)}" if r.fixture else ""
    looks = f" · {r.distractors} {r.similarity}-similarity look-alikes" if r.distractors else ""
    click.echo(
        f"{head} · {r.provider} {r.model}{fixture} · {r.needle_style} needle, {r.scoring} scoring{looks} · "
        f"threshold {r.threshold:.0%} · seed {r.seed}"
    )
    for style in r.style_names():
        _print_grid(r, style)
    click.echo(
        click.style(
            "  ✓ pass  ✗ fail  ? undecided · hits/trials · Wilson 95% interval · * stopped early (verdict settled)"
            " · @ token offset of the needle in the prompt",
            dim=True,
        )
    )

    click.echo(f"  effective context: {_effective(r)}")
    if r.power is not None:
        click.echo(f"  {power_sentence(r.power)}")
    kind = r.diagnosis.kind
    click.echo(
        f"  diagnosis: {click.style(kind, fg=_DIAG_COLOUR.get(kind, 'red'), bold=True)}: {r.diagnosis.summary}"
    )
    if kind != "all-pass":
        click.echo(f"  fix: {r.diagnosis.fix}")
    if r.reorder_ab:
        from needle_action.report.reorder import describe_reorder as describe

        click.echo(f"  reorder measured: {describe(r.reorder_ab)}")
    misses = [(c, a) for c in r.cells if c.status != "pass" for a in c.answers if not a.hit][:3]
    for c, a in misses:
        click.echo(
            click.style(
                f"  missed ({c.style}) at {c.depth:.0%} of {c.size:,} tok: "
                f'answered "{_plain(a.answer)}" (expected {_plain(a.needle)})',
                dim=True,
            )
        )
    if r.reused_from:
        calls = f"0 new calls (reused from {r.reused_from}: {r.cached_calls:,} calls)"
    else:
        calls = f"{r.calls:,} calls, {r.saved_calls:,} saved by early stopping"
    if r.speculative_calls:
        calls += f", {r.speculative_calls:,} speculative (not needed)"
    if r.lost_trials:
        calls += f", {r.lost_trials:,} trials lost (calls failed after every retry)"
    if r.history is not None:
        calls += f"; {r.history.trials():,} more trials pooled from {r.history.runs} earlier run(s)"
    cost = (
        f"${r.cost_usd:.4f}"
        if r.cost_known
        else "unknown (no price for this model: max_cost_usd is not enforced)"
    )
    click.echo(f"  calls: {calls} · cost {cost}{_billing(r.usage, r.cost_usd, r.batch)}")
    if r.partial:
        click.echo(click.style(f"  PARTIAL: {r.partial_reason}", fg="yellow", bold=True))


def _effective(r: RecallResult) -> str:
    """Effective context with its range: the estimate, where it is demonstrated, where it is lost."""
    eff = f"{r.effective_context:,} tokens" if r.effective_context else "below the smallest size tested"
    bounds = []
    if r.effective_context_low:
        bounds.append(f"demonstrated up to {r.effective_context_low:,}")
    if r.effective_context_high:
        bounds.append(f"lost by {r.effective_context_high:,}")
    if bounds:
        eff += f" ({', '.join(bounds)})"
    rel = f"{r.effective_context_relative:,} tokens" if r.effective_context_relative else "-"
    return f"{eff}; relative to the smallest size: {rel}"


def power_sentence(p: RecallPower) -> str:
    """'20 trials per cell (auto): this run detects drops >= 20 pt in the middle depths ...'."""
    how = "auto" if p.auto else "as set"
    base = f"base recall {'assumed' if p.base_rate_source == 'assumed' else 'measured'} {p.base_rate:.0%}"
    group = f"across {p.group}" if p.group.startswith("all ") else f"in the {p.group}"  # "all cells"
    if p.detectable_drop is None:
        catch = f"too few to catch even a total loss {group} with 95% power"
    else:
        catch = f"this run detects drops >= {p.detectable_drop * 100:.0f} pt {group} (95% power)"
    return f"trials: {p.trials} per cell ({how}): {catch}; {base}"


def _billing(u: TokenUsage, cost: float, batch: bool) -> str:
    """· input tokens billed (prompt caching) and what the cache and batch saved; '' when nothing was."""
    if not u.prompt_tokens or (u.billed_input_tokens >= u.prompt_tokens and not batch):
        return ""
    how = "batch, prompt caching" if batch and u.cache_read_tokens else "batch" if batch else "prompt caching"
    return (
        f" · input billed {round(u.billed_input_tokens):,} of {u.prompt_tokens:,} tokens ({how}), "
        f"${cost:.4f} instead of ${u.uncached_cost_usd:.4f}"
    )


def print_recall(results: Results) -> None:
    """Per prompt: the size x depth grid (rates, intervals, early stops, needle offsets), the
    effective context, the diagnosis and its fix, calls and cost; then one summary line."""
    sys.stderr.flush()  # progress lines (stderr) first: the results are the last thing printed
    ran = [p for p in results.prompts if p.recall is not None]
    skipped = [p for p in results.prompts if p.recall is None and p.recall_skipped]
    if not ran and not skipped:
        click.echo("no prompts with recall to report")
        return
    for p in ran:
        if p.recall is not None:  # always: ran holds those with recall (narrowed for the type)
            _print_recall_prompt(p.name, p.recall)
        click.echo("")
    for p in skipped:
        click.echo(f"recall {p.name}: {click.style('skipped', fg='yellow')}: {p.recall_skipped}")
    t = results.totals
    verdict = results.recall_status
    head = click.style(f"recall {verdict.upper()}", fg=_STATUS_COLOUR.get(verdict), bold=True)
    failed = sum(p.recall is not None and p.recall.status == "fail" for p in ran)
    text = (
        f"{head}: {len(ran)} prompt{'s' if len(ran) != 1 else ''} measured, {failed} failing, "
        f"{len(skipped)} skipped; {t.calls:,} model calls ({t.cached_calls:,} cached, "
        f"{t.saved_calls:,} saved by early stopping), ${t.cost_usd:.4f}"
    )
    text += _billing(t.usage, t.cost_usd, False)
    if t.partial:
        text += click.style(" · PARTIAL RUN", fg="yellow", bold=True)
    click.echo(text)


class _RecallProgress:
    """A click progress bar on a terminal; otherwise a plain line at every quarter (CI logs)."""

    def __init__(self, total: int, label: str, stream: TextIO) -> None:
        self.total, self.label, self.stream = max(1, total), label, stream
        self.count = 0
        self._next_line = 0.25
        self._closed = False  # closed before the results print: nothing after them
        self._bar = None
        if stream.isatty():
            self._bar = click.progressbar(length=self.total, label=label, file=stream, show_pos=True)
            self._bar.__enter__()

    def advance(self, n: int = 1) -> None:
        if n <= 0 or self._closed:
            return
        n = min(n, self.total - self.count)
        self.count += n
        if self._bar is not None:
            self._bar.update(n)
        elif self.count / self.total >= self._next_line:
            click.echo(f"{self.label}: {self.count}/{self.total} trials settled", file=self.stream)
            while self._next_line <= self.count / self.total:
                self._next_line += 0.25

    def close(self) -> None:
        """End the bar (a trial settled later, an arm or a follower, prints nothing) and flush, so
        no progress line reaches the terminal after the results."""
        self._closed = True
        if self._bar is not None:
            self._bar.__exit__(None, None, None)
            self._bar = None
        self.stream.flush()


def recall_progress(total: int, *, label: str = "recall", stream: TextIO | None = None) -> _RecallProgress:
    """Progress over TOTAL planned trials (early stops advance it by the trials they saved)."""

    return _RecallProgress(total, label, stream if stream is not None else sys.stderr)


# ---------------------------------------------------------------------------------- base vs head


def print_comparison(comparison: Comparison, notes: list[str]) -> None:
    """The PR comment's verdict in the terminal (``needle check --base-ref``): token deltas per
    prompt x fixture, recall per prompt, the reasons for each failure and the notes."""
    print_diffs(comparison)
    click.echo(f"\nbase {(comparison.base_commit or '-')[:7]} -> head {(comparison.head_commit or '-')[:7]}")
    for p in comparison.prompts:
        for t in p.tokens:
            base = _n(t.base_tokens)
            delta = (
                "new"
                if t.delta is None and t.base_tokens is None
                else (f"{t.delta:+,}" if t.delta is not None else "-")
            )
            budget = _n(t.max_input_tokens) + (" (auto)" if t.budget_source else "")
            mark = click.style(t.tier, fg={"green": "green", "yellow": "yellow", "red": "red"}[t.tier])
            click.echo(
                f"  {_plain(p.name, 40)} [{_fixture_name(t.fixture)}]: {base} -> {_n(t.head_tokens)} ({delta}), "
                f"budget {budget}  {mark}"
            )
            if t.budget_source:
                click.echo(f"      {t.budget_source}")
            if t.same_request_as:
                click.echo(f"      the same request as [{_fixture_name(t.same_request_as)}]: {REPEAT_NOTE}")
            sections = t.section_deltas()
            if sections and t.delta:
                click.echo("      " + ", ".join(f"{section_label(n)} {d:+,}" for n, d in sections.items()))
        if p.recall is not None:
            click.echo(f"  {_plain(p.name, 40)} recall: {p.recall.status}")
            _print_misses(p.recall)
    for f in comparison.failures:
        click.echo(click.style(f"  fail: {_plain(f.message, 300)}", fg="red"))
    for note in comparison.notes + notes:
        click.echo(f"  note: {_plain(note, 300)}")
    change = f" ({comparison.token_change})" if comparison.token_change else ""
    click.echo(f"\nverdict: {comparison.verdict}: {_plain(comparison.headline, 200)}{change}")


def print_diffs(comparison: Comparison) -> None:
    """The assembled requests that changed, as unified diffs labelled by section (coloured on a TTY:
    click drops the colours when the output is not a terminal)."""
    lines = list(diff_lines(comparison))
    if not lines:
        return
    click.echo("")
    for text, colour in lines:
        click.echo(click.style(text, bold=True) if colour == "bold" else click.style(text, fg=colour))


def _print_misses(rc: RecallComparison) -> None:
    for g in rc.misses:
        style = f"{_plain(g.style, 30)}, " if g.style else ""
        click.echo(f"      how it missed ({style}{_plain(g.label, 60)}):")
        for m in g.misses:
            base = f"; base hit {_plain(m.base_hit, 200)!r}" if m.base_hit is not None else ""
            click.echo(
                f"        depth {m.depth:g} of {m.size:,}: expected {_plain(m.expected, 200)!r}, "
                f"answered {_plain(m.answer, 200)!r}{base}"
            )


# ---------------------------------------------------------------------------------- history


def print_history(trends: list[PromptTrend]) -> None:
    """``needle history``: per prompt, one line per commit (oldest first): tokens, effective
    context, mid-depth recall; model drift called out on its line."""
    if not trends:
        click.echo("no results in the history")
        return
    for t in trends:
        click.echo(click.style(f"{_plain(t.prompt, 60)}", bold=True))
        click.echo(f"  {'commit':<8}  {'tokens':>8}  {'eff. context':>12}  mid-depth recall")
        for p in t.points:
            mid = f"{p.mid_rate:.0%} ({p.mid_hits}/{p.mid_trials})" if p.mid_rate is not None else "-"
            line = f"  {p.commit[:7]:<8}  {_n(p.tokens):>8}  {_n(p.effective_context):>12}  {mid}"
            click.echo(line)
            if p.drift:
                click.echo(click.style(f"    ^ {p.drift}", fg="red", bold=True))
        click.echo("")
