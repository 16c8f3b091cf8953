"""The ``needle`` CLI run from a test: in a real child process, as a developer or a runner starts
it (:func:`run_needle`), or in-process through click's runner (:func:`invoke_in`).

For the integration and e2e tiers (the unit tier starts no processes). One home for the command
line and the environment, so that every test's child imports this checkout's ``needle_action``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from click.testing import CliRunner, Result

from needle_action.cli import main
from tests.builders import REPO_ROOT

NEEDLE = [sys.executable, "-m", "needle_action"]


def needle_env(**extra: str) -> dict[str, str]:
    """This process's environment, PYTHONPATH on this checkout (the child imports it), plus EXTRA."""
    return {**os.environ, "PYTHONPATH": str(REPO_ROOT), **extra}


def run_needle(
    args: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    timeout: float = 300,
    text: bool = True,
) -> subprocess.CompletedProcess:
    """``needle ARGS`` in a child process with output captured; ENV defaults to :func:`needle_env`."""
    return subprocess.run(
        [*NEEDLE, *args],
        capture_output=True,
        text=text,
        env=dict(env) if env is not None else needle_env(),
        cwd=cwd,
        timeout=timeout,
    )


def invoke_in(repo: Path, *args: str) -> Result:
    """``needle ARGS --config needle.toml`` in this process (click's runner), run from REPO."""
    cwd = os.getcwd()
    os.chdir(repo)
    try:
        return CliRunner().invoke(main, [*args, "--config", "needle.toml"])
    finally:
        os.chdir(cwd)
