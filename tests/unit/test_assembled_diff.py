"""Issue 22: the assembled-prompt diff, per-section token deltas and the model's own misses, from
results files to the comment, the job summary, the terminal and the HTML report."""

from __future__ import annotations

import re

from markdown_it import MarkdownIt

from needle_action.compare import compare
from needle_action.compare.diff import case_diff, diff_lines, token_change
from needle_action.report.diff import fence_for, shown, terminal_lines
from needle_action.report.html import render_html
from needle_action.report.render import GITHUB_COMMENT_LIMIT, render_comment, render_summary
from needle_action.results import VIEW_LINE_MAX, AssembledView, RecallAnswer
from tests.unit._results_builder import case, grid, prompt, recall, results

SYSTEM = "You are the support agent of Acme."
SENTENCE = "Always cite the document you used."
TOOL = '{\n  "description": "Look up an order",\n  "input_schema": {},\n  "name": "lookup_order"\n}'
BASE_VIEW = f"--- system ---\n{SYSTEM}\n--- user ---\nDocuments:\n[context: 5120 chars, 4 items]\n\nQuestion: where is my order?\n"
HEAD_VIEW = BASE_VIEW.replace(SYSTEM, f"{SYSTEM} {SENTENCE}").replace(
    "--- user ---", f"--- tools ---\n{TOOL}\n--- user ---"
)
BASE_SECTIONS = {"system": 10, "tools": 0, "messages": 30, "context": 1200, "params": 0}
HEAD_SECTIONS = {"system": 18, "tools": 380, "messages": 30, "context": 1224, "params": 0}


def _pair(base_view=BASE_VIEW, head_view=HEAD_VIEW, *, sections=True, base_rec=None, head_rec=None):
    bs, hs = (BASE_SECTIONS, HEAD_SECTIONS) if sections else (None, None)
    base = results(prompt("support", [case(1240, view=base_view, sections=bs, growth="50%")], rec=base_rec))
    head = results(
        prompt("support", [case(1652, view=head_view, sections=hs, growth="50%")], rec=head_rec),
        commit="b" * 40,
    )
    return compare(base, head)


def _fences(markdown: str) -> list:
    md = MarkdownIt("commonmark", {"html": True}).enable("table")
    return [t for t in md.parse(markdown) if t.type == "fence"]


# ------------------------------------------------------------------------ the diff itself


def test_the_diff_names_the_section_of_each_change():
    d = diff_lines("fx.yaml", BASE_VIEW, HEAD_VIEW)
    assert d.sections == ["system", "tools"]
    assert (d.added, d.removed) == (7, 1)  # the changed system line, and the tool's heading + 5 lines
    lines = [x for h in d.hunks for x in h.lines]
    assert f"+{SYSTEM} {SENTENCE}" in lines
    assert f"-{SYSTEM}" in lines
    assert "+--- tools ---" in lines
    assert '+  "name": "lookup_order"' in lines
    assert " [context: 5120 chars, 4 items]" in lines  # context around the change, collapsed


def test_a_changed_document_is_one_line_of_context_shape():
    head = BASE_VIEW.replace("5120 chars", "5388 chars")
    d = case_diff(case(1300, view=head), case(1240, view=BASE_VIEW))
    assert d is not None
    changed = [x for h in d.hunks for x in h.lines if x[:1] in "+-"]
    assert changed == ["-[context: 5120 chars, 4 items]", "+[context: 5388 chars, 4 items]"]
    assert d.sections == ["user"]


def test_no_diff_when_the_request_is_the_same_and_a_note_when_a_side_has_no_view():
    same = case(1240, view=BASE_VIEW)
    assert case_diff(same, case(1240, view=BASE_VIEW)) is None
    old = case_diff(case(1300, view=HEAD_VIEW), case(1240, h="old-hash"))
    assert old is not None
    assert not old.hunks
    assert "base results carry no assembled view" in (old.note or "")


def test_model_visible_whitespace_is_shown_on_changed_lines():
    assert shown("+answer  ") == "+answer··"
    assert shown("-tab\t") == "-tab→"
    assert shown("+") == "+⏎"
    assert shown("+a\rb") == "+a␍b"
    assert shown(" context  ") == " context  "  # unchanged lines stay as they are
    d = diff_lines(None, "--- user ---\nhello\n", "--- user ---\nhello \n")
    assert [shown(x) for x in d.hunks[0].lines if x[:1] in "+-"] == ["-hello", "+hello·"]


def test_stored_view_caps_a_huge_line_but_still_sees_a_change_inside_it():
    long = "x" * 70_000
    a = AssembledView.of(f"--- user ---\n{long}\n")
    b = AssembledView.of(f"--- user ---\n{long[:30_000]}y{long[30_001:]}\n")
    assert a.truncated
    assert a.chars == 70_014
    assert len(a.text) < VIEW_LINE_MAX + 200
    assert "68,800 more chars" in a.text
    assert a.text != b.text
    assert a.sha256 != b.sha256
    assert case_diff(case(2, view="--- user ---\nb\n"), case(1, view="--- user ---\na\n")) is not None


def test_a_fence_is_longer_than_any_backtick_run():
    assert fence_for(["+a ``` b", "-````"]) == "`````"
    assert fence_for(["+plain"]) == "```"


# ------------------------------------------------------------------------ tokens per section


def test_token_change_names_the_section_that_grew_most():
    c = _pair()
    assert c.token_change == "+412 tokens, 380 of them in tools"
    assert c.prompts[0].tokens[0].section_deltas()["system"] == 8
    shrink = compare(
        results(prompt("p", [case(500, sections={"system": 300, "tools": 0})])),
        results(prompt("p", [case(300, sections={"system": 100, "tools": 0})])),
    )
    assert shrink.token_change == "-200 tokens, 200 of them from system"
    assert token_change(_pair(sections=False).prompts) == "+412 tokens"


def test_comment_shows_the_diff_the_breakdown_and_the_headline():
    text = render_comment(_pair())
    headline = MarkdownIt("commonmark").render(text.splitlines()[1])
    assert headline.endswith("· +412 tokens, 380 of them in tools</h2>\n")
    (fence,) = _fences(text)
    assert fence.info == "diff"
    body = fence.content.splitlines()
    assert body[0].startswith("@@ -1,")
    assert body[0].endswith(" system")
    assert f"+{SYSTEM} {SENTENCE}" in body
    assert "+--- tools ---" in body
    assert (
        "<details><summary>Assembled request of `support` · `fx/a.yaml` · system, tools · +7 −1 lines" in text
    )
    assert "| `support` | `fx/a.yaml` | +8 | +380 | ±0 | +24 | ±0 |" in text
    assert "## ✅ Prompts within budget, no recall regression · +412 tokens, 380 of them in tools\n" in text


def test_summary_terminal_and_html_show_the_same_diff():
    c = _pair()
    assert f"+{SYSTEM} {SENTENCE}" in render_summary(c)
    lines = list(terminal_lines(c))
    assert lines[0] == ("assembled request of support [fx/a.yaml]: system, tools (+7 -1)", "bold")
    assert (f"+{SYSTEM} {SENTENCE}", "green") in lines
    assert (f"-{SYSTEM}", "red") in lines
    html = render_html(c)
    assert '<table class="diff" data-prompt="support">' in html
    row = re.search(r'<tr class="d-change">.*?</tr>', html, re.S)
    assert row is not None
    assert SENTENCE in row.group(0)
    assert f">{SYSTEM}</td>" in row.group(0)
    assert "380 of them in tools" in html


# ------------------------------------------------------------------------ hostile content


HOSTILE = (
    "--- system ---\n"
    "```\n</details>\n<img src=x onerror=alert(1)>\n@org/team please approve\n" + "A" * 70_000 + "\n"
)


def _html_tags(markdown: str) -> list[str]:
    md = MarkdownIt("commonmark", {"html": True}).enable("table")
    out = []
    for t in md.parse(markdown):
        if t.type == "html_block":
            out.append(t.content)
        for child in t.children or []:
            if child.type == "html_inline":
                out.append(child.content)
    return out


def test_hostile_template_cannot_break_out_of_the_diff():
    c = _pair(head_view=BASE_VIEW + HOSTILE)
    for text in (render_comment(c), render_summary(c)):
        assert len(text) <= GITHUB_COMMENT_LIMIT
        fences = _fences(text)
        assert [f.info for f in fences] == ["diff"]
        assert "+</details>" in fences[0].content
        assert "+<img src=x onerror=alert(1)>" in fences[0].content
        raw_html = " ".join(_html_tags(text))
        assert "<img" not in raw_html
        assert "onerror" not in raw_html
        assert raw_html.count("<details>") == raw_html.count("</details>")
        assert re.search(r"@org", text) is None  # a zero-width joiner follows every @
        rendered = MarkdownIt("commonmark", {"html": True}).enable("table").render(text)
        assert "<img" not in rendered
        assert "&lt;img src=x onerror=alert(1)&gt;" in rendered


def test_a_huge_diff_is_trimmed_and_says_where_the_rest_is():
    many = BASE_VIEW + "".join(f"--- user ---\nline {i} {'z' * 250}\n" for i in range(2_000))
    prompts = [prompt(f"p{i}", [case(1000, view=BASE_VIEW, fixture=f"f{i}.yaml")]) for i in range(12)]
    heads = [
        prompt(f"p{i}", [case(1500, view=many.replace("line", f"row{i}"), fixture=f"f{i}.yaml")])
        for i in range(12)
    ]
    c = compare(results(*prompts), results(*heads, commit="b" * 40))
    text = render_comment(c, summary_url="https://github.com/o/r/actions/runs/1")
    assert len(text) <= GITHUB_COMMENT_LIMIT
    assert "left out here; the full diff is in the job summary and `report.html`" in text
    assert "more changed request(s) not shown here" in text
    assert all(f.info == "diff" for f in _fences(text))
    summary = render_summary(c)
    # the job summary holds far more (1 MiB); past its own cap it counts the rest too
    assert summary.count("```diff") == 10
    assert len(summary) < 1_048_576
    assert "2 more changed request(s) not shown here" in summary


# ------------------------------------------------------------------------ the model's misses


def test_sampled_misses_of_a_regressed_group_with_a_base_hit_beside_them():
    full = {0.0: (5, 5), 0.5: (5, 5), 1.0: (5, 5)}
    base_rec = recall(grid(full))
    for cell in base_rec.cells:
        cell.answers = [RecallAnswer(trial=0, needle="K3X9", answer="The code is K3X9.", hit=True)]
    wrong = [("K3X9", "I could not find a code."), ("K3X9", "K3X8"), ("K3X9", "`@org` <b>x</b>")]
    head_rec = recall(
        grid({0.0: (5, 5), 0.5: (0, 5), 1.0: (5, 5)}),
        kind="lost-in-the-middle",
        answers={(2000, 0.5): wrong, (8000, 0.5): wrong[::-1]},
    )
    c = _pair(base_rec=base_rec, head_rec=head_rec)
    rc = c.prompts[0].recall
    assert rc is not None
    assert any(g.verdict == "regressed" for g in rc.groups)
    first = rc.misses[0]
    assert len(first.misses) == 3
    assert {m.depth for m in first.misses} == {0.5}
    assert first.misses[0].expected == "K3X9"
    assert first.misses[0].base_hit == "The code is K3X9."
    text = render_comment(c)
    assert "**How it missed** (`codeword`, " in text
    assert (
        "- depth 0.5 of 2,000 tokens: expected `K3X9`, answered `I could not find a code.` · base at this cell answered `The code is K3X9.`"
        in text
    )
    assert "answered ``` `@\u200dorg` <b>x</b>``` " not in text  # the backticks pick a longer fence
    assert "answered `` `@\u200dorg` <b>x</b> ``" in text
    assert "<b>" not in " ".join(_html_tags(text))


def test_the_terminal_colours_the_diff_only_on_a_tty():
    import click
    from click.testing import CliRunner

    from needle_action.report.terminal import print_diffs

    c = _pair(head_view=HEAD_VIEW + "--- user ---\n\x1b[31mforged\x1b[0m\n")

    @click.command()
    def show():
        print_diffs(c)

    coloured = CliRunner().invoke(show, color=True).output
    assert f"\x1b[32m+{SYSTEM} {SENTENCE}\x1b[0m" in coloured
    assert f"\x1b[31m-{SYSTEM}\x1b[0m" in coloured
    assert "\x1b[32m+[31mforged[0m\x1b[0m" in coloured  # the template's own escapes are dropped
    plain = CliRunner().invoke(show, color=False).output
    assert "\x1b" not in plain
    assert f"+{SYSTEM} {SENTENCE}" in plain


def test_a_pathological_view_diffs_quickly_and_keeps_a_bounded_diff():
    import time

    started = time.perf_counter()
    d = diff_lines(None, "--- user ---\n" + "a\nb\n" * 50_000, "--- user ---\n" + "b\na\n" * 50_000)
    assert time.perf_counter() - started < 5
    assert sum(len(x) for h in d.hunks for x in h.lines) <= 250_000
    assert d.partial
    assert "not kept: the diff is too large" in (d.note or "")
