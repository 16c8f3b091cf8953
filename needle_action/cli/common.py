"""What the commands share: error handling, the options, the outputs they write, the exit."""

from __future__ import annotations

import dataclasses
import functools
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

import click

from needle_action.assemble.builder import client as builders
from needle_action.compare import compare
from needle_action.compare.history import from_folder
from needle_action.config.loader import load_config
from needle_action.config.model import Config
from needle_action.core.errors import ConfigError, NeedleError
from needle_action.core.names import PROVIDER_NAMES
from needle_action.core.paths import UnsafePath, write_user_file
from needle_action.pipeline.measure import (
    RecallOverrides,
)
from needle_action.pipeline.policy import results_exit_code
from needle_action.recall.run.scheduler import Progress
from needle_action.report.junit import junit_xml
from needle_action.report.terminal import (
    recall_progress,
)
from needle_action.results import Results, load_results

if TYPE_CHECKING:
    from needle_action.recall.run.scheduler import ProgressFactory


P = ParamSpec("P")


R = TypeVar("R")


def handle_errors(fn: Callable[P, R]) -> Callable[P, R]:
    """Turn NeedleError into its exit code with a clean message on stderr."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return fn(*args, **kwargs)
        except NeedleError as exc:
            click.echo(f"error: {exc.format()}", err=True)
            sys.exit(exc.exit_code)
        except KeyboardInterrupt:
            click.echo("interrupted", err=True)
            sys.exit(130)

    return wrapper


# what a path option or argument names: a file, or a folder (given as a pathlib.Path)
FILE = click.Path(dir_okay=False, path_type=Path)


FOLDER = click.Path(file_okay=False, path_type=Path)


config_option = click.option(
    "--config",
    "-c",
    "config_path",
    type=FILE,
    default=Path("needle.toml"),
    show_default=True,
    help="Threshold file.",
)


only_option = click.option(
    "--prompt", "-p", "only", multiple=True, help="Only this prompt (repeatable). Default: all."
)


json_option = click.option("--json", "json_out", type=FILE, help="Write the results file here.")


junit_option = click.option(
    "--junit",
    type=FILE,
    help="Also write JUnit XML here (one testcase per prompt x fixture budget and per recall group).",
)


baseline_option = click.option(
    "--baseline",
    type=FILE,
    help="Results file of the base branch to compare against (growth, recall regressions).",
)


history_option = click.option(
    "--history",
    "history_dir",
    type=FOLDER,
    help="A folder of results files of earlier unchanged main-branch runs (needle check --json): "
    "the base is another run's, and the cross-run test estimates how far runs differ from them.",
)


def load_history(folder: Path | None) -> list[Results] | None:
    """The stored runs of a --history folder (None: not given); no results file in it is an error."""
    if folder is None:
        return None
    runs = from_folder(folder)
    if not runs:
        raise ConfigError(
            f"no results files in {folder}",
            hint="fill it with `needle check --json DIR/RUN.json` on unchanged main-branch commits",
        )
    return runs


@dataclasses.dataclass(frozen=True)
class Measuring:
    """What a command that measures prompts and writes a results file is told (measure_options)."""

    config_path: Path
    only: list[str] | None  # the prompts chosen; None: all
    baseline_path: Path | None
    json_out: Path | None
    junit: Path | None

    def config(self) -> Config:
        return load_config(self.config_path)

    def baseline(self) -> Results | None:
        return load_baseline(self.baseline_path)


def measure_options(fn: Callable[..., R]) -> Callable[..., R]:
    """The options of every command that measures prompts and writes a results file, in this order
    in its --help: the threshold file, the prompts, the baseline, the results and JUnit files. They
    arrive as one Measuring (``measuring``)."""

    @functools.wraps(fn)
    def wrapper(
        *args: Any,
        config_path: Path,
        only: tuple[str, ...],
        baseline: Path | None,
        json_out: Path | None,
        junit: Path | None,
        **kwargs: Any,
    ) -> R:
        measuring = Measuring(config_path, list(only) or None, baseline, json_out, junit)
        return fn(*args, measuring=measuring, **kwargs)

    for option in reversed((config_option, only_option, baseline_option, json_option, junit_option)):
        wrapper = option(wrapper)
    return wrapper


def recall_options(fn: Callable[..., R]) -> Callable[..., R]:
    """Options shared by `recall` and `check`; they arrive as one RecallOverrides (``overrides``)."""
    options = [
        click.option(
            "--seed", type=int, help="Override the seed (needles and filler are reproducible per seed)."
        ),
        click.option("--provider", type=click.Choice(PROVIDER_NAMES), help="Override the provider."),
        click.option("--model", help="Override the model."),
        click.option("--trials", type=int, help="Override trials per cell."),
        click.option("--no-progress", is_flag=True, help="No progress bar."),
        click.option(
            "--no-cache", is_flag=True, help="Measure recall again even if an identical result is cached."
        ),
    ]

    @functools.wraps(fn)
    def wrapper(
        *args: Any,
        seed: int | None,
        provider: str | None,
        model: str | None,
        trials: int | None,
        no_progress: bool,
        no_cache: bool,
        **kwargs: Any,
    ) -> R:
        overrides = RecallOverrides(seed=seed, provider=provider, model=model, trials=trials)
        progress: ProgressFactory | None = None if no_progress else _progress_bar
        return fn(*args, overrides=overrides, progress=progress, cache=False if no_cache else None, **kwargs)

    for option in reversed(options):
        wrapper = option(wrapper)
    return wrapper


def _progress_bar(total: int, label: str) -> Progress:
    return recall_progress(total, label=label)


def load_baseline(path: Path | None) -> Results | None:
    return load_results(path) if path is not None else None


def write_output(path: Path, write: Callable[[Path], object]) -> None:
    """Write a file the user named on the command line; a bad path is a usage error, not a traceback."""
    try:
        write(path)
    except UnsafePath as exc:
        raise ConfigError(
            f"cannot write {path}: {exc.strerror or exc}",
            hint="needle never writes through a symlink or into a special file: remove it or name another path",
        ) from None
    except OSError as exc:
        raise ConfigError(
            f"cannot write {path}: {exc.strerror or exc}", hint="check the path: its folder must be writable"
        ) from None


def write_text(path: Path, text: str, what: str) -> None:
    """A report file the user named: never written through a symlink (paths.write_user_file)."""
    write_output(path, lambda p: write_user_file(p, text))
    click.echo(f"{what} written to {path}", err=True)


def builder_times() -> None:
    """Each builder's mean time per call (stdout), and a warning for one slower than
    SLOW_CALL_SECONDS (stderr): a client created or a service called on every build is invisible
    otherwise, and recall calls a builder hundreds of times."""
    lines, warnings = builders.timing_report()
    for line in lines:
        click.echo(line)
    for warning in warnings:
        click.echo(f"warning: {warning}", err=True)


def finish(
    results: Results,
    json_out: Path | None,
    *,
    stages: tuple[str, ...],
    junit: Path | None = None,
    baseline: Results | None = None,
    history: list[Results] | None = None,
) -> None:
    if json_out is not None:
        write_output(json_out, results.dump)
        click.echo(f"results written to {json_out}", err=True)
    if junit is not None:  # judged as the comparison judges it, so it agrees with `needle report`
        judged = compare(baseline, results, history=history)
        write_text(junit, junit_xml(judged, results, stages=stages), "JUnit XML")
    sys.exit(results_exit_code(results, stages=stages))


base_ref_option = click.option(
    "--base-ref",
    metavar="REF",
    help="Compare with this commit, branch or tag, measured in a temporary git worktree exactly as "
    "the action measures a pull request's base.",
)


comment_option = click.option(
    "--output",
    "-o",
    "comment_out",
    type=FILE,
    help="With a base ref: write the PR comment (Markdown) the action would post here.",
)
