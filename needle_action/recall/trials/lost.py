"""Why a needle put in the context slot is missing from the rendered prompt, in the user's terms.

Recall writes a fact into the context variable and looks for it in the request; when it is not
there, "the template does not print it" is rarely the whole story. :func:`explain` renders the
template again with a marker word as the context, then with the marker in each string field of an
item, and reads what came out: the marker missing (an ``{% if %}`` branch skipped the variable, or
the template prints other fields of each item), changed in case (``upper``/``lower``/``title``),
cut short (``truncate``, a slice), or present while the needle's sentence is not (a filter that
shortens or rewrites long text, a loop that prints only some items).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from needle_action.config import Config, PromptConfig
from needle_action.config.cases import split_case
from needle_action.core.errors import TemplateError
from needle_action.core.paths import display_path
from needle_action.recall.trials.probes.needle import Needle
from needle_action.recall.trials.slot import SlotShape, prompt_where
from needle_action.request.prompt import RenderedPrompt

MARKER = "zqxMarkerWord"  # one word only a filter changes; its upper, lower and title forms all differ
Render = Callable[[Any], RenderedPrompt]  # the context variable's value -> the rendered request


def _text(p: RenderedPrompt) -> str:
    return "\n".join(p.texts())


def _marked_item(shape: SlotShape, marker: str) -> Any:
    return shape.join([shape.item(marker, "Marker title", index=0, needle=True)])


def _field_markers(shape: SlotShape, render: Render) -> tuple[list[str], str | None]:
    """(the item's fields that print, the body field) of a list-of-mappings slot."""
    if shape.kind != "list_dict" or not shape.items:
        return [], None
    item = {
        k: f"{MARKER}{i}x" if isinstance(v, str) else v for i, (k, v) in enumerate(shape.items[0].items())
    }
    text = _text(render([item]))
    shown = [k for i, k in enumerate(item) if isinstance(item[k], str) and f"{MARKER}{i}x" in text]
    return shown, shape.body_key


def _what_happened(shape: SlotShape, render: Render, var: str, lost: str) -> str:
    text = _text(render(_marked_item(shape, MARKER)))
    if MARKER in text:
        return (
            f"a marker word put in {var!r} does print, but {lost} does not: a filter shortens or "
            "rewrites long text (truncate, wordwrap, striptags, a slice), or a loop prints only some "
            "of the items"
        )
    for changed, how in (
        (MARKER.upper(), "upper"),
        (MARKER.lower(), "lower"),
        (MARKER.title(), "title or capitalize"),
        (MARKER.capitalize(), "capitalize"),
    ):
        if changed in text:
            return (
                f"a marker word put in {var!r} comes out changed in case: a filter such as {how} rewrites it"
            )
    if MARKER[:6] in text:
        return f"a marker word put in {var!r} comes out cut short: a filter such as truncate or a slice shortens it"
    shown, body = _field_markers(shape, render)
    if shown and body is not None:
        return (
            f"the template prints the items' field(s) {', '.join(repr(k) for k in shown)} but not "
            f"{body!r}, where the item's text (and the needle) goes"
        )
    return (
        f"a marker word put in {var!r} never reaches the output: a condition ({{% if %}}, "
        "{{#if}}) skips the variable with this fixture's values, or the template reads another name"
    )


def var_line(source: str, var: str) -> int | None:
    """The first line of a template SOURCE whose tag reads VAR (``{{ var ...``, ``{% for x in var``)."""
    tag = re.compile(r"\{[{%#][^}]*?(?<![\w.])" + re.escape(var) + r"(?![\w])")
    for i, line in enumerate(source.splitlines(), start=1):
        if tag.search(line):
            return i
    return None


def explain(
    render: Render,
    shape: SlotShape,
    *,
    var: str,
    fact: str,
    prompt: str,
    file: str,
    line: int | None,
    stuck: tuple[int, int] | None = None,
) -> TemplateError:
    """The error for a needle (FACT) put in VAR that the render of PROMPT does not show; STUCK
    (size asked, most reached): the filler around it does not show, so the prompt cannot grow."""
    lost = "the filler around the needle" if stuck else "the needle's sentence"
    try:
        why = _what_happened(shape, render, var, lost)
    except Exception as exc:  # noqa: BLE001 - the diagnosis must never hide the error it explains
        why = f"rendering it again with a marker word failed too ({type(exc).__name__})"
    head = (
        f"the context put in {var!r} does not appear in the rendered prompt {prompt!r}: asked for "
        f"{stuck[0]:,} tokens, it stays at {stuck[1]:,} whatever recall adds"
        if stuck
        else f"the needle put in {var!r} does not appear in the rendered prompt {prompt!r} "
        f"(looked for {fact[:60]!r})"
    )
    return TemplateError(
        f"{head}: {why}",
        file=file,
        line=line,
        hint=f"recall hides a fact in {var!r}; print its text unchanged (`needle render` shows what the "
        "template makes of the fixture), or point context_var at the variable that is printed so",
    )


def lost_needle(
    config: Config,
    prompt: PromptConfig,
    shape: SlotShape,
    render: Callable[[Any, str], RenderedPrompt],
    needle: Needle,
    stuck: tuple[int, int] | None = None,
) -> TemplateError:
    """The error for NEEDLE missing from PROMPT's render (RENDER: context, question -> request;
    STUCK: the size asked and the most reached, when filler does not make the prompt grow), at the
    template line that reads the context variable."""
    var = prompt.slots()[0][1] or ""
    at_template = bool(prompt.template)
    line = config.line_of(f"prompts.{prompt.name}")
    if at_template:
        try:
            line = var_line(config.template_path(prompt).read_text(encoding="utf-8", errors="replace"), var)
        except OSError:
            line = None
    return explain(
        lambda context: render(context, needle.question),
        shape,
        var=var,
        fact=(needle.facts[0].strip().splitlines() or [""])[0],
        prompt=prompt.name,
        file=display_path(config.template_path(prompt) if at_template else config.path),
        line=line,
        stuck=stuck,
    )


def data_where(
    config: Config, prompt: PromptConfig, fixture: Path | None, variables: dict[str, Any]
) -> dict[str, Any]:
    """Where a case's data is written, for errors: the fixture (its file, for a case of a case
    file), else the template holding its own sample, else the prompt's table. VARIABLES: the
    case's (``prompt_variables``), which with no fixture are a template's own sample and input
    defaults: the caller read them, so the template is not read again here."""
    if fixture is not None:
        return {"file": display_path(split_case(fixture)[0])}
    if prompt.template and variables:
        return {"file": display_path(config.template_path(prompt))}
    return {**prompt_where(config, prompt), "file": display_path(config.path)}


__all__ = ["MARKER", "data_where", "explain", "lost_needle", "var_line"]
