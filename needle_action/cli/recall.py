"""``needle recall``: the positional recall map."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING

import click

from needle_action.cli.common import (
    Measuring,
    finish,
    handle_errors,
    history_option,
    load_history,
    measure_options,
    recall_options,
)
from needle_action.pipeline.measure import (
    RecallOverrides,
    Shard,
    run_recall,
)
from needle_action.report.terminal import (
    print_recall,
)

if TYPE_CHECKING:
    from needle_action.recall.run.engine import CacheArg
    from needle_action.recall.run.scheduler import ProgressFactory


@click.command()
@measure_options
@recall_options
@click.option(
    "--batch",
    is_flag=True,
    help="Send every trial through the provider's batch API (Anthropic: half price, may take hours; "
    "resumable: rerun the same command).",
)
@click.option(
    "--shard", metavar="I/N", help="Measure only slice I of N of the cells (join with `needle merge`)."
)
@history_option
@handle_errors
def recall(
    measuring: Measuring,
    overrides: RecallOverrides,
    progress: ProgressFactory | None,
    cache: CacheArg,
    batch: bool,
    shard: str | None,
    history_dir: Path | None,
) -> None:
    """Probe positional recall: needles at several depths and context sizes.

    Cells stop early once their verdict is settled (``early_stop``), except with --baseline: a run
    that will be compared asks its trials look by look and stops when the comparison decides.
    The baseline is another run's: with --history, stored runs tell how far runs differ."""
    config = measuring.config()
    base = measuring.baseline()
    history = load_history(history_dir)
    results = run_recall(
        config,
        baseline=base,
        only=measuring.only,
        overrides=dataclasses.replace(overrides, full_trials=base is not None),
        progress=progress,
        cache=cache,
        shard=Shard.parse(shard) if shard else None,
        batch=batch,
        history=history,
    )
    print_recall(results)
    finish(
        results, measuring.json_out, stages=("recall",), junit=measuring.junit, baseline=base, history=history
    )
