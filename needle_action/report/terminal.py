"""Tables for the CLI (plain click; no table library)."""

from __future__ import annotations

from pathlib import PurePosixPath

import click

from needle_action.results import BudgetCase, Results

# ---------------------------------------------------------------------------------- budget table

_BUDGET_HEADERS = ("prompt", "fixture", "tokens", "reserve", "budget", "headroom", "base", "delta", "status")
_RIGHT_ALIGNED = {"tokens", "reserve", "budget", "headroom", "base", "delta"}
_STATUS_COLOUR = {"pass": "green", "fail": "red", "error": "red", "skipped": "yellow"}


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

    problems = [
        (p.name, case.fixture, reason) for p in results.prompts for case in p.cases for reason in case.reasons
    ]
    problems += [(p.name, None, p.error) for p in results.prompts if p.error]
    if problems:
        click.echo("")
        for name, fixture, reason in problems:
            where = f"{name} [{_fixture_name(fixture)}]" if fixture else name
            click.echo(f"  {click.style('x', fg='red')} {where}: {reason}")

    click.echo("")
    click.echo(_budget_summary(results))


def _budget_summary(results: Results) -> str:
    cases = [c for p in results.prompts for c in p.cases]
    failed = sum(c.status == "fail" for c in cases)
    errors = sum(c.status == "error" for c in cases) + sum(1 for p in results.prompts if p.error)
    counters = sorted({(c.count.counter, c.count.exact, c.count.safety_factor) for c in cases})
    how = ", ".join(
        f"{name} ({'exact' if exact else 'approximate'}{f', x{f:g} safety factor' if f != 1.0 else ''})"
        for name, exact, f in counters
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
