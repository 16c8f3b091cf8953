"""``needle capture``: run the builders where no secret is, write their requests."""

from __future__ import annotations

from pathlib import Path

import click

from needle_action.cli.common import FOLDER, builder_times, config_option, handle_errors, only_option
from needle_action.config.loader import load_config
from needle_action.pipeline.capture import capture as capture_requests
from needle_action.pipeline.measure import (
    RecallOverrides,
)


@click.command()
@config_option
@only_option
@click.option(
    "--output",
    "-o",
    "out_dir",
    type=FOLDER,
    default=Path("needle-requests"),
    show_default=True,
    help="Folder to write the requests and their manifest to.",
)
@click.option("--seed", type=int, help="Override the seed (use the same with `check --requests`).")
@click.option("--trials", type=int, help="Override trials per cell (the same with `check --requests`).")
@handle_errors
def capture(
    config_path: Path, only: tuple[str, ...], out_dir: Path, seed: int | None, trials: int | None
) -> None:
    """Run every builder over its fixtures and recall trial inputs; write the requests to a folder.

    Run it where no secret is (builders are pull request code); measure the folder elsewhere with
    `needle check --requests DIR`, which runs no code (docs/security.md)."""
    config = load_config(config_path)
    counts = capture_requests(
        config, out_dir, overrides=RecallOverrides(seed=seed, trials=trials), only=list(only)
    )
    for name, n in counts.items():
        click.echo(f"{name}: {n} request(s)")
    builder_times()
    click.echo(f"wrote {out_dir}")
