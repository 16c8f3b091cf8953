"""Pictures: the Mermaid chart in the comment and the self-contained HTML report (parsed here;
tests/integration/test_html_report_chromium.py renders it in a real browser)."""

from __future__ import annotations

import re
from html.parser import HTMLParser

from needle_action.compare import AnswerSample, compare
from needle_action.report.charts import cell_tier, recall_by_depth
from needle_action.report.html import render_html
from needle_action.report.render import render_comment, render_summary
from needle_action.stats.intervals import wilson_interval
from tests.unit._results_builder import case, grid, prompt, recall, results

FULL = {0.0: (5, 5), 0.25: (5, 5), 0.5: (5, 5), 0.75: (5, 5), 1.0: (5, 5)}
DIP = {0.0: (5, 5), 0.25: (4, 5), 0.5: (1, 5), 0.75: (3, 5), 1.0: (5, 5)}
EVIL = '@octocat <img src=x onerror=alert(1)> </svg><script>alert(2)</script> ``` "quoted"'


def pair(name="rag", *, head_grid=DIP, base_grid=FULL, base_tokens=1000, head_tokens=1100, **head_kw):
    base = results(prompt(name, [case(base_tokens)], rec=recall(grid(base_grid))))
    head = results(
        prompt(name, [case(head_tokens)], rec=recall(grid(head_grid), kind="lost-in-the-middle", **head_kw)),
        commit="b" * 40,
    )
    return compare(base, head)


def mermaid_blocks(text: str) -> list[str]:
    return re.findall(r"```mermaid\n(.*?)```", text, flags=re.S)


# --------------------------------------------------------------------------- the Mermaid chart


def test_changed_prompt_with_recall_on_both_sides_gets_a_chart():
    text = render_comment(pair())
    (block,) = mermaid_blocks(text)
    lines = [line.strip() for line in block.strip().splitlines()]
    assert lines[0] == "xychart-beta"
    assert lines[1] == 'title "rag: recall by needle depth"'
    assert lines[2].startswith('x-axis "needle depth')
    assert '["0%", "25%", "50%", "75%", "100%"]' in lines[2]
    assert lines[3] == 'y-axis "recall %" 0 --> 100'
    # pooled over the two sizes: base 10/10 everywhere, head 10, 8, 2, 6, 10 of 10
    assert lines[4] == "bar [100, 100, 100, 100, 100]"
    assert lines[5] == "line [100, 80, 20, 60, 100]"
    assert "(bars: base · line: head)" in text
    assert "```mermaid" in render_summary(pair())  # the job summary shows it too


def test_no_chart_without_something_to_compare():
    unchanged = compare(
        results(prompt("p", [case(100)], rec=recall(grid(FULL), pool_key="k"))),
        results(prompt("p", [case(100)], rec=recall(grid(FULL), pool_key="k"))),
    )
    assert mermaid_blocks(render_comment(unchanged)) == []  # same prompt: status unchanged
    no_base = compare(None, results(prompt("p", [case(100)], rec=recall(grid(DIP)))))
    assert mermaid_blocks(render_comment(no_base)) == []
    other_model = compare(
        results(prompt("p", [case(100)], rec=recall(grid(FULL), model="claude-haiku-5-5"))),
        results(prompt("p", [case(200)], rec=recall(grid(DIP)))),
    )
    assert other_model.prompts[0].status == "changed"
    assert mermaid_blocks(render_comment(other_model)) == []  # not comparable
    skipped = compare(
        results(prompt("p", [case(100)], rec=recall(grid(FULL)))),
        results(prompt("p", [case(200)], skipped="no key")),
    )
    assert mermaid_blocks(render_comment(skipped)) == []


def test_chart_text_cannot_break_out_of_mermaid():
    c = pair(name="x")
    c.prompts[0].name = 'evil"]\n    line [1]\n%%{init: {}}%%'
    (block,) = mermaid_blocks(render_comment(c))
    assert block.count("\n    line ") == 1
    assert "%%{" not in block
    assert '"]' not in block.split("\n")[1][:-1]


def test_charts_fit_the_comment_limit_with_many_changed_prompts():
    names = [f"prompt_{i}" for i in range(150)]
    sizes = (1000, 2000, 4000, 8000)
    base = results(*[prompt(n, [case(1000)], rec=recall(grid(FULL, sizes=sizes))) for n in names])
    head = results(*[prompt(n, [case(1050)], rec=recall(grid(DIP, sizes=sizes))) for n in names])
    text = render_comment(compare(base, head))
    assert len(text) <= 65536
    assert "job summary" in text


def test_depth_rates_handle_missing_cells():
    c = pair(head_grid={0.0: (5, 5), 1.0: (5, 5)})  # the head did not run the middle depths
    chart = recall_by_depth(c.prompts[0])
    assert chart is not None
    assert chart.bars.values == [100, 100, 100, 100, 100]
    assert chart.lines[0].values == [100, None, None, None, 100]
    assert "line [100, 0, 0, 0, 100]" in chart.mermaid()  # Mermaid needs a number at each tick


# --------------------------------------------------------------------------- the HTML report


class Collect(HTMLParser):
    """Tags with their attributes, and the text of <title> elements in order."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict]] = []
        self.titles: list[str] = []
        self._in_title = False

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        self._in_title = tag == "title"

    def handle_endtag(self, tag):
        self._in_title = False

    def handle_data(self, data):
        if self._in_title:
            self.titles.append(data)


def parsed(text: str) -> Collect:
    p = Collect()
    p.feed(text)
    return p


def test_one_cell_per_size_and_depth_and_side_with_the_right_fill():
    c = pair()
    doc = parsed(render_html(c))
    cells = [a for t, a in doc.tags if t == "rect" and "cell" in a.get("class", "")]
    assert len(cells) == 2 * 2 * 5  # base and head, 2 sizes x 5 depths
    rc = c.prompts[0].recall
    for a in cells:
        cell = rc.cell(int(a["data-size"]), float(a["data-depth"]))
        side = a["data-side"]
        hits, trials = (
            (cell.base_hits, cell.base_trials) if side == "base" else (cell.head_hits, cell.head_trials)
        )
        tier = cell_tier(hits / trials, 0.8, trials)
        assert f"fill-{tier}" in a["class"].split()
        assert a["data-tier"] == tier
    head_tiers = sorted(a["data-tier"] for a in cells if a["data-side"] == "head")
    # per size the depths read 5/5, 4/5, 1/5, 3/5, 5/5: pass, pass (at 80%), fail, near, pass
    assert head_tiers == ["fail"] * 2 + ["near"] * 2 + ["pass"] * 6
    flagged = [a for a in cells if "flagged" in a["class"].split()]
    assert flagged
    assert all(a["data-side"] == "head" for a in flagged)


def test_hover_shows_counts_and_the_wilson_interval():
    doc = parsed(render_html(pair()))
    low, high = wilson_interval(1, 5)
    tip = next(t for t in doc.titles if "depth 50% · head" in t and "2,000 tokens" in t)
    assert f"1/5 = 20% (95% Wilson interval {low:.0%}–{high:.0%})" in tip
    assert "regressed" in tip


def test_self_contained_and_escaped():
    c = pair(name="x")
    c.prompts[0].name = EVIL
    c.prompts[0].template = f"prompts/{EVIL}.j2"
    c.prompts[0].recall.head.summary = EVIL
    c.prompts[0].recall.samples.append(AnswerSample(size=2000, depth=0.5, expected="K3X9", answer=EVIL))
    text = render_html(c)
    doc = parsed(text)
    tags = {t for t, _ in doc.tags}
    assert "script" not in tags
    assert "img" not in tags
    assert "link" not in tags
    assert "iframe" not in tags
    assert "<script" not in text.lower()
    assert "<img" not in text
    # nothing is loaded from anywhere: no element has a src, href or style URL
    assert not [a for _, a in doc.tags if {"src", "href", "xlink:href"} & set(a)]
    assert "url(" not in text
    assert "default-src 'none'" in text
    assert "&lt;script&gt;" in text  # the hostile text is there, as text


def test_report_without_base_shows_the_head_only():
    head = results(prompt("p", [case(100)], rec=recall(grid(DIP))))
    doc = parsed(render_html(compare(None, head)))
    figures = [a for t, a in doc.tags if t == "figure"]
    assert [f["data-side"] for f in figures] == ["head"]
    assert not any(t == "svg" and "chart" in a.get("class", "") for t, a in doc.tags)
