"""``needle render``: exactly what a prompt would send, as a view or a request body."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from needle_action.cli.common import config_option, handle_errors
from needle_action.config.loader import load_config
from needle_action.pipeline.measure import (
    render_prompt_cases,
)
from needle_action.request.view import request_view
from needle_action.request.wire import anthropic_body, openai_body


@click.command()
@click.argument("name")
@click.option("--fixture", "-f", help="Fixture path (default: every fixture of the prompt).")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "json", "openai"]),
    default="text",
    show_default=True,
    help="text: a labelled view; json: the exact Anthropic Messages body; openai: the chat completions body.",
)
@config_option
@handle_errors
def render(name: str, fixture: str | None, fmt: str, config_path: Path) -> None:
    """Print exactly what prompt NAME would send, rendered with its fixtures.

    With one case (one fixture, or --fixture) the json/openai formats print the request body
    itself; with several, a JSON list of {"fixture": ..., "body": ...}."""
    config = load_config(config_path)
    prompt = config.prompts.get(name)
    cases = list(render_prompt_cases(config, name, fixture=fixture))
    if fmt == "text":
        for case in cases:
            click.echo(f"=== {name} [{case.fixture or 'no fixture'}]")
            click.echo(request_view(case), nl=False)
        return
    assert prompt is not None  # render_prompt_cases checked the name
    if fmt == "json" and len(cases) == 1 and "raw_body" in cases[0].meta:
        raw: str = cases[0].meta["raw_body"]  # a recorded request, unchanged: its own bytes
        sys.stdout.flush()
        sys.stdout.buffer.write(raw.encode("utf-8"))
        sys.stdout.buffer.flush()
        return
    body = anthropic_body if fmt == "json" else openai_body
    bodies = [body(c, prompt.model, prompt.reserve_output_tokens) for c in cases]
    out: object = (
        bodies[0]
        if len(cases) == 1
        else [{"fixture": c.fixture, "body": b} for c, b in zip(cases, bodies, strict=True)]
    )
    click.echo(json.dumps(out, indent=2, ensure_ascii=False))
