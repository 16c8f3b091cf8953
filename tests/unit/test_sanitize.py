"""sanitize.inline / sanitize.code on hostile strings: nothing live may survive into the comment."""

from __future__ import annotations

import re

import pytest

from needle_action.report.sanitize import ZWJ, code, inline, is_safe

HOSTILE = [
    "@octocat please merge",
    "cc @my-org/security-team and ＠admin",
    "<img src=https://evil.example/pixel.png onerror=alert(1)>",
    "<details open><summary>approved</summary></details>",
    "<!-- needle-action:comment -->",
    "```\n## injected heading\n```",
    "`` ` ``` ```` unbalanced",
    "| col | break | the | table |",
    "line one\nline two\r\nline three\u2028four",
    "[click me](https://evil.example) ![x](https://evil.example/x.png)",
    "fixes #1, closes owner/repo#2",
    "\u202egnp.exe\u202c hidden \u200b zero width \x00 nul \x1b[31m ansi",
    "# heading at start",
    "- list at start",
    "$\\sqrt{x}$ math",
    "javascript:alert(1) https://example.com",
]


@pytest.mark.parametrize("text", HOSTILE)
def test_inline_is_inert(text):
    out = inline(text)
    assert is_safe(out), out
    assert "<" not in out
    assert ">" not in out
    assert "\n" not in out
    assert "\r" not in out
    assert "\u2028" not in out
    assert not re.search(r"(?<!\\)[|`\[\]]", out), out
    assert "\u202e" not in out
    assert "\x00" not in out
    assert "\x1b" not in out


def test_mentions_and_references_are_broken_but_readable():
    out = inline("ping @octocat about #12")
    assert f"@{ZWJ}octocat" in out
    assert f"#{ZWJ}12" in out
    assert out.replace(ZWJ, "") == "ping @octocat about #12"


def test_html_is_escaped_not_rendered():
    assert inline("<b>x</b> & y") == "&lt;b&gt;x&lt;/b&gt; &amp; y"


def test_autolinks_are_broken():
    out = inline("see https://evil.example/x")
    assert "https://" not in out
    assert "https" in out


def test_newlines_collapse_and_length_caps():
    assert inline("a\n\n\nb") == "a ⏎ b"
    out = inline("x" * 1000, limit=50)
    assert len(out) == 50
    assert out.endswith("…")


def test_cap_never_cuts_an_escape_in_half():
    for n in range(1, 20):
        out = inline("|" * 40, limit=n)
        assert not re.search(r"(?<!\\)\|", out)


def test_code_span_only_when_safe():
    assert code("prompts/rag.j2") == "`prompts/rag.j2`"
    assert code("@team") == "`@team`"  # mentions are inert inside code spans
    assert not code("a`b").startswith("`")
    assert is_safe(code("a`b"))
    assert is_safe(code("a|b"))
    assert is_safe(code("a\nb"))


def test_none_and_numbers():
    assert inline(None) == ""
    assert inline(3) == "3"
