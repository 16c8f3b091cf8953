"""Make untrusted text safe to show inside our Markdown comment.

Model answers, template paths, prompt names, fixture names and diagnosis text can all come from a
pull request (or from a model that read attacker text). Shown raw in a PR comment they could ping
people (``@org/team``), cross-reference issues (``#1``), inject HTML or images (tracking pixels,
fake "approved" badges), break out of a table cell (``|``) or a code span/fence (backticks), or
hide text with bidi controls. :func:`inline` turns any value into one inert line of Markdown text.
"""

from __future__ import annotations

import re
import unicodedata

ZWJ = "\u200d"  # zero-width joiner: keeps the text readable but breaks @mention / #ref detection
ELLIPSIS = "…"

# every ASCII punctuation mark that means something to GitHub Markdown inside one line;
# CommonMark lets any ASCII punctuation be backslash-escaped, so this is always safe
_MD_SPECIAL = re.compile(r"([\\`*_\[\]{}()!|~^$])")
_MENTION = re.compile(r"([@＠])(?=[A-Za-z0-9_-])")
_REFERENCE = re.compile(r"(#)(?=\d)")
_URL_SCHEME = re.compile(r"(?i)\b(https?|ftp|mailto|javascript|data)(:)")
_NEWLINES = re.compile(r"[\r\n\u0085\u2028\u2029\v\f]+")
_SPACES = re.compile(r"[ \t]{2,}")


def _strip_controls(text: str) -> str:
    """Drop C0/C1 controls and format characters (bidi overrides, zero-widths) except tab/newline."""
    if text.isascii() and text.isprintable():
        return text  # the common case, without a per-character loop
    out = []
    for ch in text:
        if ch in "\t\n\r":
            out.append(ch)
            continue
        cat = unicodedata.category(ch)
        if cat in ("Cc", "Cf", "Cs", "Co"):
            continue
        out.append(ch)
    return "".join(out)


def strip_controls(text: str) -> str:
    """TEXT without control and format characters (bidi overrides, zero-widths), tab and newline kept."""
    return _strip_controls(text)


def inline(value: object, limit: int = 200) -> str:
    """One line of inert Markdown text, at most LIMIT visible characters of the original.

    Order matters: cap first (so an escape sequence is never cut in half), then remove controls,
    collapse line breaks, escape HTML, escape Markdown punctuation, then break mentions/references
    and autolinks with a zero-width joiner.
    """
    if value is None:
        return ""
    text = str(value)
    text = _strip_controls(text)
    text = _NEWLINES.sub(" ⏎ ", text)
    text = _SPACES.sub(" ", text).strip()
    if limit and len(text) > limit:
        text = text[: max(0, limit - 1)].rstrip() + ELLIPSIS
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    text = _MD_SPECIAL.sub(r"\\\1", text)
    text = _MENTION.sub(lambda m: m.group(1) + ZWJ, text)
    text = _REFERENCE.sub(lambda m: m.group(1) + ZWJ, text)
    text = _URL_SCHEME.sub(lambda m: m.group(1) + ZWJ + m.group(2), text)
    if text[:1] in "#-+=" and text:
        text = "\\" + text  # a leading marker would start a heading or list item in a list context
    return text


def code(value: object, limit: int = 120) -> str:
    """Show VALUE as inline code when it is safe to, else as escaped text.

    A code span needs a fence longer than any backtick run inside; simpler and safer: values that
    contain a backtick, a pipe or a line break are shown with :func:`inline` instead.
    """
    if value is None:
        return ""
    text = _strip_controls(str(value))
    if limit and len(text) > limit:
        text = text[: max(0, limit - 1)] + ELLIPSIS
    if any(c in text for c in "`|\r\n") or not text.strip():
        return inline(text, limit=0)
    return f"`{text}`"


def code_span(value: object, limit: int = 200) -> str:
    """VALUE as one inline code span whatever it holds (a model's answer): controls removed, line
    breaks shown as ``⏎``, cut to LIMIT characters, a backtick fence longer than any run inside,
    ``@`` and ``#`` broken with a zero-width joiner. Inside a code span Markdown and HTML are not
    interpreted; not for table cells (a ``|`` there still splits the cell): use it in list items.
    """
    if value is None:
        return ""
    text = _NEWLINES.sub(" ⏎ ", _strip_controls(str(value))).replace("\t", " ")
    if limit and len(text) > limit:
        text = text[: max(0, limit - 1)] + ELLIPSIS
    if not text.strip():
        return "(empty)" if not text else "(blank)"
    text = _MENTION.sub(lambda m: m.group(1) + ZWJ, text)
    text = _REFERENCE.sub(lambda m: m.group(1) + ZWJ, text)
    text = _URL_SCHEME.sub(lambda m: m.group(1) + ZWJ + m.group(2), text)
    run = max((len(m) for m in re.findall(r"`+", text)), default=0)
    fence = "`" * (run + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def is_safe(text: str) -> bool:
    """A quick check used by tests: no raw HTML, no live mention, no line break, no bare pipe."""
    if "<" in text or ">" in text or "\n" in text or "\r" in text:
        return False
    if re.search(r"(?<!\\)\|", text) or re.search(r"(?<!\\)`", text):
        return False
    return not re.search(r"[@＠][A-Za-z0-9_-]", text)
