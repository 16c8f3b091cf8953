"""``needle check``: budgets and recall together, what the action runs on each side."""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from needle_action.cli.common import (
    FOLDER,
    Measuring,
    base_ref_option,
    builder_times,
    comment_option,
    finish,
    handle_errors,
    measure_options,
    recall_options,
    write_output,
)
from needle_action.cli.preview import compare_with_ref, refuse_with_base_ref
from needle_action.core.errors import ConfigError
from needle_action.pipeline.capture import measuring_captured
from needle_action.pipeline.measure import (
    RecallOverrides,
    run_check,
)
from needle_action.report.terminal import (
    print_budget,
    print_recall,
)
from needle_action.results import Results

if TYPE_CHECKING:
    from needle_action.recall.run.engine import CacheArg
    from needle_action.recall.run.scheduler import ProgressFactory


@click.command()
@measure_options
@recall_options
@click.option("--no-recall", is_flag=True, help="Budgets only.")
@base_ref_option
@comment_option
@click.option(
    "--requests",
    "requests_dir",
    type=FOLDER,
    help="Measure the requests `needle capture` wrote there: no builder runs.",
)
@handle_errors
def check(
    measuring: Measuring,
    overrides: RecallOverrides,
    progress: ProgressFactory | None,
    cache: CacheArg,
    no_recall: bool,
    base_ref: str | None,
    comment_out: Path | None,
    requests_dir: Path | None,
) -> None:
    """Budgets and recall together: what the GitHub Action runs on each side.

    With --base-ref REF: the pull request preview. The base is measured in a git worktree with the
    action's code and trust rules, and the comparison is printed (-o: the comment's Markdown)."""
    if base_ref is not None:
        if requests_dir is not None:
            raise ConfigError("--requests measures one side: it does not combine with --base-ref")
        refuse_with_base_ref(
            only=measuring.only, baseline=measuring.baseline_path, overrides=overrides, cache=cache
        )
        compare_with_ref(measuring, base_ref, overrides, not no_recall, comment_out)
    if comment_out is not None:
        raise ConfigError(
            "-o/--output writes the PR comment: it needs --base-ref REF", hint="or use `needle report`"
        )
    config = measuring.config()
    base = measuring.baseline()
    json_out = measuring.json_out

    def budgets_decided(results: Results) -> None:  # shown and saved before recall can fail
        print_budget(results)
        sys.stdout.flush()
        if json_out is not None and not no_recall:
            write_output(json_out, results.dump)

    with contextlib.ExitStack() as stack:
        if requests_dir is not None:
            config = stack.enter_context(measuring_captured(config, requests_dir, overrides))
        results = run_check(
            config,
            baseline=base,
            only=measuring.only,
            overrides=overrides,
            recall=not no_recall,
            progress=progress,
            cache=cache,
            after_budget=budgets_decided,
        )
    if not no_recall:
        print_recall(results)
        sys.stdout.flush()
    builder_times()
    stages = ("budget",) if no_recall else ("budget", "recall")
    finish(results, json_out, stages=stages, junit=measuring.junit, baseline=base)
