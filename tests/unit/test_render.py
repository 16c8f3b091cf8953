"""render_comment / render_summary: structure, sanitising of every user value, size limit."""

from __future__ import annotations

import re

from markdown_it import MarkdownIt

from needle_action.compare import compare
from needle_action.report.render import MARKER, render_comment, render_summary, square
from needle_action.report.sanitize import is_safe
from tests.unit._results_builder import case, grid, prompt, recall, results

FULL = {0.0: (5, 5), 0.5: (5, 5), 1.0: (5, 5)}
EVIL = "@octocat <img src=x onerror=alert(1)> | ``` [x](https://evil)"


def _lost_middle(answer=EVIL, name="rag", fixture="fx/a.yaml"):
    base = results(prompt(name, [case(1000, fixture=fixture)], rec=recall(grid(FULL))))
    head = results(
        prompt(
            name,
            [case(1060, fixture=fixture)],
            rec=recall(
                grid({0.0: (5, 5), 0.5: (0, 5), 1.0: (5, 5)}),
                kind="lost-in-the-middle",
                answers={(2000, 0.5): [("K3X9", answer)] * 3},
            ),
        ),
        commit="b" * 40,
    )
    return compare(base, head)


def test_comment_structure():
    text = render_comment(_lost_middle(), summary_url="https://github.com/o/r/actions/runs/9")
    assert text.startswith(MARKER + "\n")
    assert "## ❌ Positional recall regressed" in text
    assert "| 🟡 | `rag`" in text  # +6% of a 10% allowance -> yellow
    assert "| 2,000 | 🟩→🟩 | 🟩→🟥 ‼️ | 🟩→🟩 |" in text
    assert "**Fix:** Move key content" in text
    assert "<details><summary>Recall cells of `rag`</summary>" in text
    assert "(https://github.com/o/r/actions/runs/9)" in text


def test_every_hostile_value_is_sanitised():
    c = _lost_middle(name="x|y@octocat", fixture="f`x</details>.yaml")
    text = render_comment(c) + render_summary(c)
    # our own markup is the only HTML: details/summary/sub tags and the marker. Outside code spans
    # (the misses show the model's reply in one, where Markdown shows `<img` as text) not even as text
    md = MarkdownIt("commonmark", {"html": True}).enable("table")
    html = [
        t.content
        for block in md.parse(text)
        for t in [block, *(block.children or [])]
        if t.type in ("html_block", "html_inline")
    ]
    assert set(re.findall(r"</?([a-zA-Z!-]+)", " ".join(html))) <= {"details", "summary", "sub", "!--"}
    outside_code = re.sub(r"(`+)[^`].*?\1", "", text)
    tags = set(re.findall(r"</?([a-zA-Z!-]+)", outside_code))
    assert tags <= {"details", "summary", "sub", "!--"}, tags
    assert "<img" not in md.render(text)
    assert "@octocat" not in text
    assert "](https://evil" not in text
    for line in text.splitlines():
        if "K3X9" in line and line.startswith("|"):  # the wrong-answer row
            answer_cell = line.split(" | ")[-1]
            assert is_safe(answer_cell.rstrip(" |")), line
            assert line.count("|") - line.count("\\|") == 6  # table shape intact (style column included)


def test_size_limit_drops_details_then_points_to_summary():
    c = _lost_middle()
    full = render_comment(c, summary_url="https://x.test/run")
    smaller = render_comment(c, summary_url="https://x.test/run", max_chars=len(full) - 1)
    assert len(smaller) < len(full)
    assert "Wrong answers" not in smaller
    assert "[Full report in the job summary](https://x.test/run)" in smaller
    tiny = render_comment(c, summary_url="https://x.test/run", max_chars=600)
    assert len(tiny) <= 600
    assert tiny.startswith(MARKER)
    assert "job summary" in tiny


def test_huge_run_stays_under_github_limit():
    many = [
        prompt(
            f"p{i}",
            [case(1000 + i, fixture=f"fx/{j}.yaml") for j in range(5)],
            rec=recall(
                grid(FULL, sizes=(1000, 2000, 4000, 8000)), answers={(1000, 0.5): [("a", "b" * 300)] * 5}
            ),
        )
        for i in range(120)
    ]
    text = render_comment(compare(None, results(*many)))
    assert len(text) <= 65536
    assert text.startswith(MARKER)
    summary = render_summary(compare(None, results(*many)))
    assert len(summary) > 65536  # the summary keeps everything


def test_unchanged_cases_are_collapsed_when_trimming():
    c = compare(
        results(*[prompt(f"p{i}", [case(100)]) for i in range(50)]),
        results(*[prompt(f"p{i}", [case(100)]) for i in range(50)]),
    )
    full = render_comment(c)
    assert full.count("| 🟢 |") == 50
    trimmed = render_comment(c, max_chars=len(full) - 200)
    assert "50 unchanged case(s) within budget not shown" in trimmed


def test_squares():
    assert [square(r, 0.8, 5) for r in (1.0, 0.8, 0.6, 0.59, None)] == ["🟩", "🟩", "🟨", "🟥", "⬜"]
    assert square(1.0, 0.8, 0) == "⬜"


def test_skipped_recall_note():
    c = compare(None, results(prompt("r", [case(10)], skipped="ANTHROPIC_API_KEY is not set (fork PR?)")))
    text = render_comment(c, notes=["Recall skipped: no API key"])
    assert "recall skipped: ANTHROPIC\\_API\\_KEY is not set" in text
    assert "ℹ️ Recall skipped: no API key" in text


def test_a_fixture_that_repeats_an_earlier_request_is_named_in_the_comment():
    first, again = case(900, fixture="fx/first.yaml"), case(900, fixture="fx/again.yaml")
    again.same_request_as = "fx/first.yaml"
    base = results(prompt("faq", [case(900, fixture="fx/first.yaml"), case(900, fixture="fx/again.yaml")]))
    text = render_comment(compare(base, results(prompt("faq", [first, again]), commit="b" * 40)))
    assert "Fixtures that test nothing more" in text
    assert "- `faq`: `fx/again.yaml` renders the same request as `fx/first.yaml`" in text
    assert "`fx/first.yaml` renders the same" not in text
    assert "test nothing more" not in render_comment(_lost_middle())
