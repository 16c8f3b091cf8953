"""``needle report``: compare results files, render the comment, HTML or JUnit."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from needle_action.cli.common import (
    FILE,
    handle_errors,
    history_option,
    junit_option,
    load_baseline,
    load_history,
    write_output,
    write_text,
)
from needle_action.compare import compare
from needle_action.core.paths import write_user_file
from needle_action.pipeline.policy import comparison_exit_code
from needle_action.report.html import render_html
from needle_action.report.junit import junit_xml
from needle_action.report.render import render_comment
from needle_action.results import load_results


@click.command()
@click.argument("head", type=FILE)
@click.option("--base", type=FILE, help="Base results to compare with.")
@click.option(
    "--format", "fmt", type=click.Choice(["markdown", "json"]), default="markdown", show_default=True
)
@click.option("--output", "-o", type=FILE, help="Write here, not stdout.")
@click.option(
    "--html",
    "html_out",
    type=FILE,
    help="Also write a self-contained HTML report here (heatmaps, token table, diagnosis).",
)
@junit_option
@history_option
@handle_errors
def report(
    head: Path,
    base: Path | None,
    fmt: str,
    output: Path | None,
    html_out: Path | None,
    junit: Path | None,
    history_dir: Path | None,
) -> None:
    """Compare results files and render the PR comment (Markdown) or the verdicts (JSON).

    A base from another run is tested across runs: with --history, stored runs tell how far runs
    differ; without, the run the head kept a record of, else a stated prior."""
    head_results = load_results(head)
    comparison = compare(load_baseline(base), head_results, history=load_history(history_dir))
    text = comparison.model_dump_json(indent=2) if fmt == "json" else render_comment(comparison)
    if output:
        write_output(output, lambda path: write_user_file(path, text))
    else:
        click.echo(text)
    if html_out is not None:
        write_text(html_out, render_html(comparison), "HTML report")
    if junit is not None:
        write_text(junit, junit_xml(comparison, head_results), "JUnit XML")
    sys.exit(comparison_exit_code(comparison))
