"""``needle init``: write a starter threshold file for this repository."""

from __future__ import annotations

from pathlib import Path

import click

from needle_action.cli.common import FOLDER, config_option, handle_errors
from needle_action.scaffold.starter import left_out, write_starter


@click.command()
@click.option("--force", is_flag=True, help="Overwrite an existing threshold file.")
@click.option("--root", type=FOLDER, default=Path("."), show_default=True)
@config_option
@handle_errors
def init(force: bool, root: Path, config_path: Path) -> None:
    """Scan ROOT for prompt templates and write a commented starter threshold file."""
    written = write_starter(root, config_path, force=force)
    click.echo(f"wrote {written}")
    waiting = left_out(written.read_text(encoding="utf-8"))
    if waiting:
        click.echo(
            f"left out until they render ({len(waiting)}): {', '.join(waiting)}: each table is in "
            f"{written.name}, commented out under a NOTE that says what to fix"
        )
