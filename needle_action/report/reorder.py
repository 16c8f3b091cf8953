"""The reorder arm's measured gain in words, for the comment and the terminal."""

from __future__ import annotations

from collections.abc import Callable

from needle_action.results import ReorderDepth


def describe_reorder(rows: list[ReorderDepth], style: Callable[[str], str] = str) -> str:
    """The measured gain, e.g. "edge_order would lift depth 0.5 from 40% to 85%" (or "lower", or
    "leave ... at"), for the comment and the terminal. STYLE formats a style's name (the comment
    passes its sanitiser: a comparison file may come from an untrusted run)."""
    parts = []
    for r in rows:
        if r.rate is None or r.edge_rate is None:
            continue
        a, b = round(r.rate * 100), round(r.edge_rate * 100)
        verb = "lift" if b > a else ("lower" if b < a else "leave")
        change = f"from {a}% to {b}%" if verb != "leave" else f"at {a}%"
        where = f"depth {r.depth:g}" + (f" ({style(r.style)})" if len({x.style for x in rows}) > 1 else "")
        parts.append(f"{verb} {where} {change} ({r.edge_hits}/{r.edge_trials} vs {r.hits}/{r.trials})")
    return "edge_order would " + "; ".join(parts) if parts else ""
