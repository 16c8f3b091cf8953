"""``needle diff REF`` and ``needle check --base-ref REF``: the pull request preview, measured
with the action's own code and trust rules."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from needle_action.cli.common import (
    Measuring,
    builder_times,
    comment_option,
    config_option,
    handle_errors,
    json_option,
    junit_option,
    recall_options,
    write_output,
    write_text,
)
from needle_action.core.errors import ConfigError
from needle_action.pipeline.measure import (
    Measure,
    RecallOverrides,
)
from needle_action.pipeline.policy import comparison_exit_code
from needle_action.pullrequest.sides import compare_sides, local_settings, measure_pull_request
from needle_action.report.comment_body import with_head
from needle_action.report.junit import junit_xml
from needle_action.report.render import render_comment
from needle_action.report.terminal import (
    print_budget,
    print_comparison,
    print_recall,
)

if TYPE_CHECKING:
    from needle_action.recall.run.engine import CacheArg
    from needle_action.recall.run.scheduler import ProgressFactory


@click.command()
@click.argument("ref")
@config_option
@json_option
@junit_option
@recall_options
@click.option("--no-recall", is_flag=True, help="Budgets only.")
@comment_option
@handle_errors
def diff(
    ref: str,
    config_path: Path,
    json_out: Path | None,
    junit: Path | None,
    overrides: RecallOverrides,
    progress: ProgressFactory | None,
    cache: CacheArg,
    no_recall: bool,
    comment_out: Path | None,
) -> None:
    """Compare the working tree with REF as the action compares a pull request with its base
    (the same as `needle check --base-ref REF`)."""
    refuse_with_base_ref(only=None, baseline=None, overrides=overrides, cache=cache)
    measuring = Measuring(config_path, None, None, json_out, junit)
    compare_with_ref(measuring, ref, overrides, not no_recall, comment_out)


def refuse_with_base_ref(
    *, only: list[str] | None, baseline: Path | None, overrides: RecallOverrides, cache: CacheArg
) -> None:
    """Options the action has no input for would make the preview differ from the PR's verdict."""
    given = [
        name
        for name, value in (
            ("--prompt", only),
            ("--baseline", baseline),
            ("--model", overrides.model),
            ("--no-cache", cache is False),
        )
        if value
    ]
    if given:
        raise ConfigError(
            f"{', '.join(given)} cannot be combined with a base ref",
            hint="the base-ref preview measures every prompt exactly as the action does; drop the option",
        )


def compare_with_ref(
    measuring: Measuring, ref: str, overrides: RecallOverrides, recall: bool, comment_out: Path | None
) -> None:
    """Measure the working tree and REF with the action's code (needle_action/pullrequest/sides.py), print the
    comparison, write the comment the action would post; exit by the action's default policy."""
    settings = local_settings(measuring.config_path, ref, Measure(recall=recall, overrides=overrides))
    json_out, junit = measuring.json_out, measuring.junit
    sides = measure_pull_request(settings)
    comparison = compare_sides(settings, sides)
    print_budget(sides.head)
    if recall:
        print_recall(sides.head)
    print_comparison(comparison, sides.notes)
    builder_times()
    if comment_out is not None:
        body = with_head(render_comment(comparison, notes=sides.notes), sides.head.commit)
        write_text(comment_out, body, "PR comment")
    if json_out is not None:
        write_output(json_out, sides.head.dump)
        click.echo(f"results written to {json_out}", err=True)
    if junit is not None:
        write_text(junit, junit_xml(comparison, sides.head), "JUnit XML")
    sys.exit(comparison_exit_code(comparison))
