"""Charts of recall (and, later, of history): one data model, drawn as Mermaid or as inline SVG.

An :class:`XYChart` is a categorical x axis (depths today; commits for a history trend) with up to
one bar series and any number of line series on a 0-100 (or other) y axis. It renders as

* a Mermaid ``xychart-beta`` block for the PR comment (GitHub draws it natively; Mermaid has no
  legend, so the caption above the block says which series is which), and
* a self-contained SVG for the HTML report (no script, every label escaped).

:func:`recall_by_depth` builds the chart of one prompt's recall by needle depth, pooled over the
sizes, base against head. Everything that came from a pull request (prompt names) is reduced to
safe characters before it enters Mermaid text, and escaped before it enters SVG.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass, field

from needle_action.compare import PromptComparison, RecallComparison
from needle_action.compare.models import PromptTrend

_MERMAID_UNSAFE = re.compile(r"[^A-Za-z0-9 _.,:%()+/-]")
BASE_COLOUR = "#8c959f"
HEAD_COLOUR = "#0969da"


@dataclass(frozen=True)
class Series:
    """One named series of values, one per x tick (None: no value there)."""

    name: str
    values: list[float | None]
    colour: str = HEAD_COLOUR


@dataclass(frozen=True)
class XYChart:
    """A categorical x axis, a numeric y axis, an optional bar series and line series."""

    title: str
    x_label: str
    x_ticks: list[str]
    y_label: str
    y_min: float = 0.0
    y_max: float = 100.0
    bars: Series | None = None
    lines: list[Series] = field(default_factory=list)

    def caption(self) -> str:
        """Which series is which (Mermaid draws no legend)."""
        parts = [f"bars: {self.bars.name}"] if self.bars else []
        parts += [f"line: {s.name}" for s in self.lines]
        return " · ".join(parts)

    def mermaid(self) -> str:
        """The chart as a fenced ``mermaid`` block (``xychart-beta``)."""

        def values(s: Series) -> str:
            # Mermaid needs a number at every tick; a missing value is drawn at the axis minimum
            return "[" + ", ".join(_num(v if v is not None else self.y_min) for v in s.values) + "]"

        ticks = ", ".join(f'"{mermaid_text(t)}"' for t in self.x_ticks)
        lines = [
            "```mermaid",
            "xychart-beta",
            f'    title "{mermaid_text(self.title)}"',
            f'    x-axis "{mermaid_text(self.x_label)}" [{ticks}]',
            f'    y-axis "{mermaid_text(self.y_label)}" {_num(self.y_min)} --> {_num(self.y_max)}',
        ]
        if self.bars is not None:
            lines.append(f"    bar {values(self.bars)}")
        lines += [f"    line {values(s)}" for s in self.lines]
        lines.append("```")
        return "\n".join(lines)

    def svg(self, width: int = 420, height: int = 220) -> str:
        """The chart as an inline ``<svg>`` element: bars, lines with points, axes, ticks, a legend;
        each point's ``<title>`` gives its value on hover."""
        return _Svg(self, width, height).render()


def cell_tier(rate: float | None, threshold: float | None, trials: int | None) -> str:
    """pass: at or above the threshold; near: within 0.2 below it; fail: lower; none: not run.
    The one rule behind the comment's squares and the HTML heatmap's fills."""
    if rate is None or not trials or threshold is None:
        return "none"
    if rate >= threshold - 1e-9:
        return "pass"
    if rate >= threshold - 0.2 - 1e-9:
        return "near"
    return "fail"


def mermaid_text(text: str) -> str:
    """TEXT reduced to characters that cannot end a Mermaid string or start a directive."""
    return _MERMAID_UNSAFE.sub("", str(text))[:80].strip()


def _num(v: float) -> str:
    return f"{v:.0f}" if float(v).is_integer() else f"{v:.1f}"


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


class _Svg:
    """Lays out one :class:`XYChart` as SVG (pure string building, every text escaped)."""

    left, right, top, bottom = 44, 12, 26, 44

    def __init__(self, chart: XYChart, width: int, height: int) -> None:
        self.c, self.w, self.h = chart, width, height
        self.pw = width - self.left - self.right
        self.ph = height - self.top - self.bottom
        self.n = max(1, len(chart.x_ticks))

    def x(self, i: int) -> float:
        return self.left + self.pw * (i + 0.5) / self.n

    def y(self, v: float) -> float:
        span = (self.c.y_max - self.c.y_min) or 1.0
        clamped = min(max(v, self.c.y_min), self.c.y_max)
        return self.top + self.ph * (1 - (clamped - self.c.y_min) / span)

    def render(self) -> str:
        """The whole <svg> element."""
        c = self.c
        parts = [
            f'<svg class="chart" xmlns="http://www.w3.org/2000/svg" width="{self.w}" height="{self.h}" '
            f'viewBox="0 0 {self.w} {self.h}" role="img" aria-label="{_e(c.title)}">',
            f'<text class="chart-title" x="{self.left}" y="14">{_e(c.title)}</text>',
            *self._axes(),
        ]
        if c.bars is not None:
            parts += self._bars(c.bars)
        for s in c.lines:
            parts += self._line(s)
        parts += self._legend()
        parts.append("</svg>")
        return "".join(parts)

    def _axes(self) -> list[str]:
        c, out = self.c, []
        for frac in (0.0, 0.5, 1.0):
            v = c.y_min + frac * (c.y_max - c.y_min)
            y = self.y(v)
            out.append(
                f'<line class="grid" x1="{self.left}" x2="{self.w - self.right}" y1="{y:.1f}" y2="{y:.1f}"/>'
            )
            out.append(
                f'<text class="tick" x="{self.left - 4}" y="{y + 4:.1f}" text-anchor="end">{_num(v)}</text>'
            )
        for i, t in enumerate(c.x_ticks):
            out.append(
                f'<text class="tick" x="{self.x(i):.1f}" y="{self.top + self.ph + 14}" '
                f'text-anchor="middle">{_e(t)}</text>'
            )
        out.append(
            f'<text class="axis" x="{self.left + self.pw / 2:.1f}" y="{self.h - 16}" '
            f'text-anchor="middle">{_e(c.x_label)}</text>'
        )
        return out

    def _bars(self, s: Series) -> list[str]:
        bw = self.pw / self.n * 0.5
        out = []
        for i, v in enumerate(s.values):
            if v is None:
                continue
            y0, y1 = self.y(v), self.y(self.c.y_min)
            out.append(
                f'<rect class="bar" x="{self.x(i) - bw / 2:.1f}" y="{y0:.1f}" width="{bw:.1f}" '
                f'height="{max(0.0, y1 - y0):.1f}" fill="{s.colour}">'
                f"<title>{_e(s.name)} {_e(self.c.x_ticks[i])}: {_num(v)}</title></rect>"
            )
        return out

    def _line(self, s: Series) -> list[str]:
        points = [(self.x(i), self.y(v), i, v) for i, v in enumerate(s.values) if v is not None]
        if not points:
            return []
        path = " ".join(f"{x:.1f},{y:.1f}" for x, y, _, _ in points)
        out = [f'<polyline class="line" points="{path}" fill="none" stroke="{s.colour}" stroke-width="2"/>']
        for x, y, i, v in points:
            out.append(
                f'<circle class="point" cx="{x:.1f}" cy="{y:.1f}" r="3.5" fill="{s.colour}">'
                f"<title>{_e(s.name)} {_e(self.c.x_ticks[i])}: {_num(v)}</title></circle>"
            )
        return out

    def _legend(self) -> list[str]:
        items = ([self.c.bars] if self.c.bars else []) + list(self.c.lines)
        out, x = [], float(self.left)
        for s in items:
            out.append(f'<rect x="{x:.0f}" y="{self.h - 10}" width="10" height="8" fill="{s.colour}"/>')
            out.append(f'<text class="legend" x="{x + 14:.0f}" y="{self.h - 2}">{_e(s.name)}</text>')
            x += 22 + 7 * len(s.name)
        return out


# --------------------------------------------------------------------------- recall by depth


def depth_rates(rc: RecallComparison, side: str) -> list[float | None]:
    """Recall (0-100) at each depth of RC, pooled over the sizes, for SIDE ("base" or "head")."""
    out: list[float | None] = []
    for d in rc.depths:
        hits = trials = 0
        for s in rc.sizes:
            cell = rc.cell(s, d)
            if cell is None:
                continue
            h, n = (
                (cell.base_hits, cell.base_trials) if side == "base" else (cell.head_hits, cell.head_trials)
            )
            hits, trials = hits + (h or 0), trials + (n or 0)
        out.append(round(100 * hits / trials, 1) if trials else None)
    return out


def compared(p: PromptComparison) -> bool:
    """Whether P has recall on both sides that can be drawn against each other."""
    rc = p.recall
    return (
        rc is not None
        and rc.status != "skipped"
        and rc.base is not None
        and rc.head is not None
        and rc.comparable
        and bool(rc.cells)
    )


def recall_by_depth(p: PromptComparison) -> XYChart | None:
    """Recall by needle depth, base (bars) against head (line); None without recall on both sides."""
    rc = p.recall
    if rc is None or not compared(p):
        return None
    return XYChart(
        title=f"{p.name}: recall by needle depth",
        x_label="needle depth from the start of the context",
        x_ticks=[f"{d * 100:.0f}%" for d in rc.depths],
        y_label="recall %",
        bars=Series("base", depth_rates(rc, "base"), BASE_COLOUR),
        lines=[Series("head", depth_rates(rc, "head"), HEAD_COLOUR)],
    )


def comment_chart(p: PromptComparison) -> str:
    """The Mermaid block for the PR comment (a caption line, then the block), or "" when what recall
    measures did not change (same fingerprint) or there is no recall on both sides to compare."""
    rc = p.recall
    if rc is None or rc.unchanged or p.status == "deleted":
        return ""
    chart = recall_by_depth(p)
    if chart is None:
        return ""
    return f"*Recall by needle depth, all sizes pooled ({chart.caption()}):*\n\n{chart.mermaid()}\n"


def trend_chart(trend: PromptTrend) -> XYChart:
    """One prompt's mid-depth recall per commit (main-branch history, the PR head last)."""
    return XYChart(
        title=f"{trend.prompt}: mid-depth recall by commit",
        x_label="commit",
        x_ticks=[p.commit[:7] for p in trend.points],
        y_label="recall %",
        lines=[
            Series(
                "mid-depth recall (%)",
                [None if p.mid_rate is None else round(p.mid_rate * 100, 1) for p in trend.points],
            )
        ],
    )


def comment_trend(trend: PromptTrend) -> str:
    """The trend block for the PR comment: a caption with the tokens and effective context per
    commit (Mermaid has one y axis), then the chart; "" when no point has recall."""
    if all(p.mid_rate is None for p in trend.points):
        return ""
    tokens = " → ".join("–" if p.tokens is None else f"{p.tokens:,}" for p in trend.points)
    eff = " → ".join("–" if p.effective_context is None else f"{p.effective_context:,}" for p in trend.points)
    return (
        f"*Trend on main, this PR last: tokens {tokens} · effective context {eff}:*\n\n"
        f"{trend_chart(trend).mermaid()}\n"
    )


__all__ = [
    "Series",
    "XYChart",
    "cell_tier",
    "comment_chart",
    "comment_trend",
    "compared",
    "depth_rates",
    "mermaid_text",
    "recall_by_depth",
    "trend_chart",
]
