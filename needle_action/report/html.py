"""The HTML report: one self-contained file with a heatmap per prompt, the token table, the diagnosis.

``needle report head.json --base base.json --html report.html`` writes it; the action puts it in its
report folder as ``report.html``. The file loads nothing: CSS is inline, the heatmaps and charts are
inline SVG, there is no script, and a Content-Security-Policy of ``default-src 'none'`` says so to
the browser as well. Hovering a heatmap cell shows its counts and Wilson interval (an SVG
``<title>``).

It is HTML, so everything that came from a pull request or a model (prompt names, paths, fixture
names, diagnoses quoting them, wrong answers) is escaped by Jinja's autoescape, after control and
bidi characters are removed and long values are cut (the environment's ``finalize``). The geometry
and the classes are computed here; the template only places them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import jinja2
from markupsafe import Markup

from needle_action import __version__
from needle_action.compare import CellDelta, Comparison, PromptComparison, RecallComparison
from needle_action.compare.diff import section_label
from needle_action.report import charts, sanitize
from needle_action.report.diff import side_by_side
from needle_action.report.render import DIAGNOSIS_LABEL, SECTIONS, STATUS_LABEL, VERDICT_LABEL, section_rows
from needle_action.stats.intervals import wilson_interval

TEMPLATES = Path(__file__).parent / "templates"
CELL_W, CELL_H = 72, 40
LEFT, TOP = 86, 34  # room for the size labels (left) and the depth labels (top)
_FLAGGED = ("regressed", "below-threshold")


@dataclass(frozen=True)
class HeatCell:
    """One size x depth cell of one side, placed and classified."""

    size: int
    depth: float
    hits: int | None
    trials: int | None
    rate: float | None
    low: float | None
    high: float | None
    tier: str  # pass | near | fail | none (charts.cell_tier)
    verdict: str
    x: int
    y: int

    @property
    def label(self) -> str:
        """The text in the cell: hits/trials."""
        return f"{self.hits}/{self.trials}" if self.trials else "–"

    def hover(self, side: str) -> str:
        """What the cell's tooltip says: where, the counts, the interval, the verdict."""
        where = f"{self.size:,} tokens · depth {self.depth * 100:.0f}% · {side}"
        if not self.trials or self.rate is None:
            return f"{where}: not run"
        interval = f"95% Wilson interval {self.low:.0%}–{self.high:.0%}"
        verdict = str(VERDICT_LABEL.get(self.verdict, self.verdict)).strip("*")
        return f"{where}: {self.hits}/{self.trials} = {self.rate:.0%} ({interval}) · {verdict}"


@dataclass(frozen=True)
class Heatmap:
    side: str
    sizes: list[int]
    depths: list[float]
    cells: list[HeatCell]
    width: int
    height: int


def _side_counts(cell: CellDelta, side: str) -> tuple[int | None, int | None]:
    return (cell.base_hits, cell.base_trials) if side == "base" else (cell.head_hits, cell.head_trials)


def heatmap(rc: RecallComparison, side: str) -> Heatmap:
    """The SIDE ("base" or "head") of RC's grid: one cell per size x depth, not-run cells included."""
    cells: list[HeatCell] = []
    for row, size in enumerate(rc.sizes):
        for col, depth in enumerate(rc.depths):
            delta = rc.cell(size, depth)
            hits, trials = _side_counts(delta, side) if delta is not None else (None, None)
            rate = hits / trials if trials and hits is not None else None
            low, high = wilson_interval(hits or 0, trials) if trials else (None, None)
            cells.append(
                HeatCell(
                    size=size,
                    depth=depth,
                    hits=hits,
                    trials=trials,
                    rate=rate,
                    low=low,
                    high=high,
                    tier=charts.cell_tier(rate, rc.threshold, trials),
                    verdict=delta.verdict if delta is not None and side == "head" else "",
                    x=LEFT + col * CELL_W,
                    y=TOP + row * CELL_H,
                )
            )
    return Heatmap(
        side=side,
        sizes=list(rc.sizes),
        depths=list(rc.depths),
        cells=cells,
        width=LEFT + CELL_W * len(rc.depths) + 4,
        height=TOP + CELL_H * len(rc.sizes) + 4,
    )


def heatmaps(p: PromptComparison) -> list[Heatmap]:
    """Base and head side by side when both measured comparable grids; else the head alone."""
    rc = p.recall
    if rc is None or rc.status == "skipped" or not rc.cells:
        return []
    sides = ["base", "head"] if rc.base is not None and rc.comparable else ["head"]
    return [heatmap(rc, side) for side in sides]


def depth_chart(p: PromptComparison) -> Markup:
    """The SVG chart of P's recall by depth (base bars, head line), or nothing."""
    chart = charts.recall_by_depth(p)
    return Markup(chart.svg()) if chart is not None else Markup("")  # noqa: S704 - escaped in charts


# --------------------------------------------------------------------------- the environment


def _finalize(value: object) -> object:
    """Every printed value: no control or bidi characters, at most 2,000 characters; escaping is
    autoescape's job (Markup from our own code passes as is)."""
    if isinstance(value, Markup) or not isinstance(value, str):
        return "" if value is None else value
    text = sanitize.strip_controls(value)
    return text if len(text) <= 2000 else text[:1999] + "…"


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATES)),
        autoescape=True,
        finalize=_finalize,
        trim_blocks=True,
        lstrip_blocks=True,
        undefined=jinja2.StrictUndefined,
    )
    env.filters.update(
        num=lambda n: "–" if n is None else f"{n:,}",
        rate=lambda r: "–" if r is None else f"{r:.0%}",
        signed=lambda n: "–" if n is None else f"{n:+,}",
        pct=lambda d: f"{d * 100:.0f}%",
        pts=lambda drop: "–" if drop is None else f"{round(-drop * 100):+d} pt",
        pvalue=lambda p: "–" if p is None else f"{p:.3g}",
        diagnosis=lambda k: DIAGNOSIS_LABEL.get(k, k),
        verdict=lambda v: str(VERDICT_LABEL.get(v, v)).strip("*"),
        short=lambda sha: (sha or "")[:7] or "–",
        section=section_label,
        clip=lambda v: v if len(v) <= 200 else v[:199] + "…",
    )
    env.globals.update(
        heatmaps=heatmaps,
        depth_chart=depth_chart,
        STATUS_LABEL=STATUS_LABEL,
        CELL_W=CELL_W,
        CELL_H=CELL_H,
        LEFT=LEFT,
        TOP=TOP,
        version=__version__,
        side_by_side=side_by_side,
        section_rows=section_rows,
        section_names=[section_label(n) for n in SECTIONS],
    )
    return env


_ENV: jinja2.Environment | None = None


def render_html(comparison: Comparison, *, title: str = "needle report") -> str:
    """The report as one self-contained HTML document."""
    global _ENV
    if _ENV is None:
        _ENV = _environment()
    return _ENV.get_template("report.html.j2").render(c=comparison, title=title)


__all__ = ["HeatCell", "Heatmap", "heatmap", "heatmaps", "render_html"]
