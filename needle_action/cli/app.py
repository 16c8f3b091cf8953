"""The ``needle`` command line: a thin face over ``needle_action.pipeline.measure``.

Every command loads the threshold file, runs one pipeline function and maps the outcome to an
exit code: 0 pass, 1 checks failed, 2 config/usage error, 3 provider unavailable.
A :class:`~needle_action.core.errors.NeedleError` is printed as ``file:line: message`` with its hint,
never as a traceback.
"""

from __future__ import annotations

import click

from needle_action import __version__
from needle_action.cli.budget import budget
from needle_action.cli.capture import capture
from needle_action.cli.check import check
from needle_action.cli.doctor import doctor
from needle_action.cli.history import history
from needle_action.cli.init import init
from needle_action.cli.merge import merge
from needle_action.cli.plan import plan
from needle_action.cli.preview import diff
from needle_action.cli.recall import recall
from needle_action.cli.render import render
from needle_action.cli.report import report
from needle_action.pipeline.measure import freeze_at_exit


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="needle")
def main() -> None:
    """needle: token budgets and positional recall checks for prompt templates.

    \b
    Typical use:
      needle init                 write a starter needle.toml for this repository
      needle render rag_answer    print exactly what would be sent
      needle budget               count real tokens against the budgets
      needle recall               probe recall by needle position and context size
      needle check                budgets and recall together (what the action runs)
      needle diff main -o c.md    the PR preview: compare with a ref as the action does
      needle history --data-branch needle-action-data   the trend on main, model drift
      needle merge a.json b.json  join the slices of `needle recall --shard i/n` runs
      needle doctor               check this machine first when something fails
    """
    freeze_at_exit()


for command in (init, render, budget, recall, plan, merge, check, capture, doctor, diff, history, report):
    main.add_command(command)

__all__ = ["main"]
