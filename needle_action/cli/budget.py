"""``needle budget``: every prompt x fixture counted against its budgets."""

from __future__ import annotations

import click

from needle_action.cli.common import Measuring, builder_times, finish, handle_errors, measure_options
from needle_action.pipeline.measure import (
    run_budget,
)
from needle_action.report.terminal import (
    print_budget,
)
from needle_action.tokens.counting import count_offline


@click.command()
@measure_options
@click.option(
    "--offline",
    is_flag=True,
    help='Never call an API: tokenizer = "anthropic" counts with tiktoken (approximate). For pre-commit.',
)
@handle_errors
def budget(measuring: Measuring, offline: bool) -> None:
    """Count real tokens of every prompt x fixture and check them against the budgets."""
    config = measuring.config()
    if offline:
        count_offline(config)
    base = measuring.baseline()
    results = run_budget(config, baseline=base, only=measuring.only)
    print_budget(results)
    builder_times()
    finish(results, measuring.json_out, stages=("budget",), junit=measuring.junit, baseline=base)
