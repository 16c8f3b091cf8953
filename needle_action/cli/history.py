"""``needle history``: the trend per prompt over main-branch runs."""

from __future__ import annotations

import json
from pathlib import Path

import click

from needle_action.cli.common import FILE, FOLDER, handle_errors, only_option, write_text
from needle_action.compare.history import from_data_branch, from_folder, trends
from needle_action.core.errors import ConfigError
from needle_action.report.terminal import (
    print_history,
)


@click.command()
@click.option(
    "--data-branch",
    metavar="BRANCH",
    help="Read the results a main-branch action run stored on this branch (local, or origin/BRANCH).",
)
@click.option(
    "--dir",
    "folder",
    type=FOLDER,
    help="Read a folder of results files instead (ordered by its index.json, else by modification time).",
)
@click.option(
    "--repo",
    type=FOLDER,
    default=Path("."),
    show_default=True,
    help="The git repository holding the data branch.",
)
@only_option
@click.option("--json", "json_out", type=FILE, help="Write the trends here.")
@handle_errors
def history(
    data_branch: str | None, folder: Path | None, repo: Path, only: tuple[str, ...], json_out: Path | None
) -> None:
    """The trend per prompt over main-branch commits: tokens, effective context and mid-depth
    recall; a recall drop with an unchanged prompt fingerprint is called out as model drift."""
    if folder is not None and data_branch is None:
        runs = from_folder(folder)
    elif data_branch is not None and folder is None:
        runs = from_data_branch(repo, data_branch)
    else:
        raise ConfigError(
            "needle history reads either --data-branch BRANCH or --dir FOLDER",
            hint="e.g. `needle history --data-branch needle-action-data` (the action's `data-branch` input)",
        )
    found = trends(runs, only=list(only) or None)
    print_history(found)
    if json_out is not None:
        text = json.dumps([t.model_dump(mode="json") for t in found], indent=2)
        write_text(json_out, text, "trends")
