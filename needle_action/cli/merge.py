"""``needle merge``: join the results files of sharded recall runs."""

from __future__ import annotations

from pathlib import Path

import click

from needle_action.cli.common import FILE, finish, handle_errors, junit_option
from needle_action.recall.run.merge import merge_files
from needle_action.report.terminal import (
    print_recall,
)


@click.command()
@click.argument("files", nargs=-1, required=True, type=FILE)
@click.option(
    "--output",
    "-o",
    type=FILE,
    required=True,
    help="Merged results file.",
)
@junit_option
@handle_errors
def merge(files: tuple[Path, ...], output: Path, junit: Path | None) -> None:
    """Join the results files of `needle recall --shard i/n` runs into one results file."""
    results = merge_files(list(files))
    print_recall(results)
    finish(results, output, stages=("recall",), junit=junit)
