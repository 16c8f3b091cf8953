"""The ``needle`` command line: a thin face over ``needle_action.pipeline``.

Every command loads the threshold file, runs one pipeline function and maps the outcome to an
exit code: 0 pass, 1 checks failed, 2 config/usage error, 3 provider unavailable.
A :class:`~needle_action.errors.NeedleError` is printed as ``file:line: message`` with its hint,
never as a traceback.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

import click

from needle_action import __version__
from needle_action.capture import capture as capture_requests
from needle_action.capture import measuring_captured
from needle_action.compare import compare
from needle_action.compare.history import from_data_branch, from_folder, trends
from needle_action.config.loader import load_config
from needle_action.config.model import Config
from needle_action.doctor import exit_code as doctor_exit_code
from needle_action.doctor import format_line, run_checks
from needle_action.errors import EXIT_CONFIG, ConfigError, NeedleError
from needle_action.flow.comment_body import with_head
from needle_action.flow.sides import compare_sides, local_settings, measure_pull_request
from needle_action.names import PROVIDER_NAMES
from needle_action.paths import UnsafePath, write_user_file
from needle_action.pipeline import (
    Measure,
    RecallOverrides,
    Shard,
    freeze_at_exit,
    render_prompt_cases,
    run_budget,
    run_check,
    run_recall,
    select_prompts,
)
from needle_action.policy import comparison_exit_code, results_exit_code
from needle_action.recall.merge import merge_files
from needle_action.recall.scheduler import Progress
from needle_action.report.html import render_html
from needle_action.report.junit import junit_xml
from needle_action.report.render import render_comment
from needle_action.report.terminal import (
    print_budget,
    print_comparison,
    print_history,
    print_recall,
    recall_progress,
)
from needle_action.results import Results, load_results
from needle_action.scaffold import write_starter

if TYPE_CHECKING:
    from needle_action.recall.engine import CacheArg
    from needle_action.recall.scheduler import ProgressFactory

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
        return _baseline(self.baseline_path)


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


def _load(config_path: Path) -> Config:
    return load_config(config_path)


def _baseline(path: Path | None) -> Results | None:
    return load_results(path) if path is not None else None


def _write_output(path: Path, write: Callable[[Path], object]) -> None:
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


def _write_text(path: Path, text: str, what: str) -> None:
    """A report file the user named: never written through a symlink (paths.write_user_file)."""
    _write_output(path, lambda p: write_user_file(p, text))
    click.echo(f"{what} written to {path}", err=True)


def _finish(
    results: Results,
    json_out: Path | None,
    *,
    stages: tuple[str, ...],
    junit: Path | None = None,
    baseline: Results | None = None,
) -> None:
    if json_out is not None:
        _write_output(json_out, results.dump)
        click.echo(f"results written to {json_out}", err=True)
    if junit is not None:  # judged as the comparison judges it, so it agrees with `needle report`
        _write_text(junit, junit_xml(compare(baseline, results), results, stages=stages), "JUnit XML")
    sys.exit(results_exit_code(results, stages=stages))


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


@main.command()
@click.option("--force", is_flag=True, help="Overwrite an existing threshold file.")
@click.option("--root", type=FOLDER, default=Path("."), show_default=True)
@config_option
@handle_errors
def init(force: bool, root: Path, config_path: Path) -> None:
    """Scan ROOT for prompt templates and write a commented starter threshold file."""
    written = write_starter(root, config_path, force=force)
    click.echo(f"wrote {written}")


@main.command()
@click.argument("name")
@click.option("--fixture", "-f", help="Fixture path (default: every fixture of the prompt).")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "json", "openai"]),
    default="text",
    show_default=True,
    help="text: a labelled view; json: the exact Anthropic Messages body; openai: the chat completions body.",
)
@config_option
@handle_errors
def render(name: str, fixture: str | None, fmt: str, config_path: Path) -> None:
    """Print exactly what prompt NAME would send, rendered with its fixtures.

    With one case (one fixture, or --fixture) the json/openai formats print the request body
    itself; with several, a JSON list of {"fixture": ..., "body": ...}."""
    config = _load(config_path)
    prompt = config.prompts.get(name)
    cases = list(render_prompt_cases(config, name, fixture=fixture))
    if fmt == "text":
        for case in cases:
            click.echo(f"=== {name} [{case.fixture or 'no fixture'}]")
            click.echo(case.as_text(), nl=False)
        return
    assert prompt is not None  # render_prompt_cases checked the name
    if fmt == "json" and len(cases) == 1 and "raw_body" in cases[0].meta:
        raw: str = cases[0].meta["raw_body"]  # a recorded request, unchanged: its own bytes
        sys.stdout.flush()
        sys.stdout.buffer.write(raw.encode("utf-8"))
        sys.stdout.buffer.flush()
        return
    body = "to_anthropic_body" if fmt == "json" else "to_openai_body"
    bodies = [getattr(c, body)(prompt.model, prompt.reserve_output_tokens) for c in cases]
    out: object = (
        bodies[0]
        if len(cases) == 1
        else [{"fixture": c.fixture, "body": b} for c, b in zip(cases, bodies, strict=True)]
    )
    click.echo(json.dumps(out, indent=2, ensure_ascii=False))


def _offline(config: Config) -> None:
    """Count without the network: prompts whose tokenizer is the Anthropic API count with tiktoken
    instead (approximate, with their safety factor, marked ~ in the table)."""
    for prompt in config.prompts.values():
        if prompt.tokenizer == "anthropic":
            prompt.tokenizer = "tiktoken:o200k_base"


@main.command()
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
        _offline(config)
    base = measuring.baseline()
    results = run_budget(config, baseline=base, only=measuring.only)
    print_budget(results)
    _finish(results, measuring.json_out, stages=("budget",), junit=measuring.junit, baseline=base)


@main.command()
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
@handle_errors
def recall(
    measuring: Measuring,
    overrides: RecallOverrides,
    progress: ProgressFactory | None,
    cache: CacheArg,
    batch: bool,
    shard: str | None,
) -> None:
    """Probe positional recall: needles at several depths and context sizes.

    Cells stop early once their verdict is settled (``early_stop``), except with --baseline: a run
    that will be compared asks its trials look by look and stops when the comparison decides."""
    config = measuring.config()
    base = measuring.baseline()
    results = run_recall(
        config,
        baseline=base,
        only=measuring.only,
        overrides=dataclasses.replace(overrides, full_trials=base is not None),
        progress=progress,
        cache=cache,
        shard=Shard.parse(shard) if shard else None,
        batch=batch,
    )
    print_recall(results)
    _finish(results, measuring.json_out, stages=("recall",), junit=measuring.junit, baseline=base)


@main.command()
@config_option
@only_option
@baseline_option
@click.option("--json", "json_out", type=FILE, help="Write the plan here.")
@handle_errors
def plan(config_path: Path, only: tuple[str, ...], baseline: Path | None, json_out: Path | None) -> None:
    """Calls, tokens and dollars a compared recall run will spend, before any call (offline)."""
    from needle_action.recall.cache import ResultCache, default_cache_path
    from needle_action.runplan import as_json, format_plans, plan_prompt

    config = _load(config_path)
    base = _baseline(baseline)
    path = default_cache_path()  # read only: an absent cache is not created by a plan
    cache = ResultCache(path) if path.is_file() else None
    chosen = [p for p in select_prompts(config, list(only) or None) if p.recall.enabled]
    plans = [plan_prompt(p, base, config=config, cache=cache) for p in chosen]
    click.echo(format_plans(plans))
    if json_out is not None:
        _write_text(json_out, json.dumps(as_json(plans), indent=2) + "\n", "plan")


@main.command()
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
    _finish(results, output, stages=("recall",), junit=junit)


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


@main.command()
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
        _refuse_with_base_ref(
            only=measuring.only, baseline=measuring.baseline_path, overrides=overrides, cache=cache
        )
        _compare_with_ref(measuring, base_ref, overrides, not no_recall, comment_out)
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
            _write_output(json_out, results.dump)

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
    stages = ("budget",) if no_recall else ("budget", "recall")
    _finish(results, json_out, stages=stages, junit=measuring.junit, baseline=base)


@main.command()
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
    config = _load(config_path)
    counts = capture_requests(
        config, out_dir, overrides=RecallOverrides(seed=seed, trials=trials), only=list(only)
    )
    for name, n in counts.items():
        click.echo(f"{name}: {n} request(s)")
    click.echo(f"wrote {out_dir}")


@main.command()
@click.option(
    "--config",
    "-c",
    "config_path",
    type=FILE,
    default=None,
    help="Threshold file whose clouds to check (default: needle.toml when there is one).",
)
@handle_errors
def doctor(config_path: Path | None) -> None:
    """Check this machine: Python, tokenizers, the embedded model (a tiny completion in a worker),
    provider keys (never printed), the clouds the threshold file uses (their credentials by name),
    git and the cache folder. Run it first when something fails."""
    checks = []
    for check in run_checks(_providers_used(config_path)):
        click.echo(format_line(check))
        sys.stdout.flush()
        checks.append(check)
    sys.exit(doctor_exit_code(checks))


def _providers_used(config_path: Path | None) -> set[str]:
    """The providers the threshold file's prompts use (none when it does not load: the doctor
    checks the machine, a broken file is `needle budget`'s to report)."""
    path = config_path or Path("needle.toml")
    if config_path is None and not path.is_file():
        return set()
    try:
        return {p.provider for p in load_config(path).prompts.values()}
    except NeedleError as exc:
        click.echo(f"warn  threshold file: {exc.message} (its clouds are not checked)")
        return set()


@main.command()
@click.argument("ref")
@config_option
@json_option
@junit_option
@recall_options
@click.option("--no-recall", is_flag=True, help="Budgets only.")
@comment_option
@handle_errors
def diff(
    ref: str,
    config_path: Path,
    json_out: Path | None,
    junit: Path | None,
    overrides: RecallOverrides,
    progress: ProgressFactory | None,
    cache: CacheArg,
    no_recall: bool,
    comment_out: Path | None,
) -> None:
    """Compare the working tree with REF as the action compares a pull request with its base
    (the same as `needle check --base-ref REF`)."""
    _refuse_with_base_ref(only=None, baseline=None, overrides=overrides, cache=cache)
    measuring = Measuring(config_path, None, None, json_out, junit)
    _compare_with_ref(measuring, ref, overrides, not no_recall, comment_out)


def _refuse_with_base_ref(
    *, only: list[str] | None, baseline: Path | None, overrides: RecallOverrides, cache: CacheArg
) -> None:
    """Options the action has no input for would make the preview differ from the PR's verdict."""
    given = [
        name
        for name, value in (
            ("--prompt", only),
            ("--baseline", baseline),
            ("--model", overrides.model),
            ("--no-cache", cache is False),
        )
        if value
    ]
    if given:
        raise ConfigError(
            f"{', '.join(given)} cannot be combined with a base ref",
            hint="the base-ref preview measures every prompt exactly as the action does; drop the option",
        )


def _compare_with_ref(
    measuring: Measuring, ref: str, overrides: RecallOverrides, recall: bool, comment_out: Path | None
) -> None:
    """Measure the working tree and REF with the action's code (needle_action/flow/sides.py), print the
    comparison, write the comment the action would post; exit by the action's default policy."""
    settings = local_settings(measuring.config_path, ref, Measure(recall=recall, overrides=overrides))
    json_out, junit = measuring.json_out, measuring.junit
    sides = measure_pull_request(settings)
    comparison = compare_sides(settings, sides)
    print_budget(sides.head)
    if recall:
        print_recall(sides.head)
    print_comparison(comparison, sides.notes)
    if comment_out is not None:
        body = with_head(render_comment(comparison, notes=sides.notes), sides.head.commit)
        _write_text(comment_out, body, "PR comment")
    if json_out is not None:
        _write_output(json_out, sides.head.dump)
        click.echo(f"results written to {json_out}", err=True)
    if junit is not None:
        _write_text(junit, junit_xml(comparison, sides.head), "JUnit XML")
    sys.exit(comparison_exit_code(comparison))


@main.command()
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
        _write_text(json_out, text, "trends")


@main.command()
@click.argument("head", type=FILE)
@click.option("--base", type=FILE, help="Base results to compare with.")
@click.option(
    "--format", "fmt", type=click.Choice(["markdown", "json"]), default="markdown", show_default=True
)
@click.option("--output", "-o", type=FILE, help="Write here, not stdout.")
@click.option(
    "--html",
    "html_out",
    type=FILE,
    help="Also write a self-contained HTML report here (heatmaps, token table, diagnosis).",
)
@junit_option
@handle_errors
def report(
    head: Path, base: Path | None, fmt: str, output: Path | None, html_out: Path | None, junit: Path | None
) -> None:
    """Compare results files and render the PR comment (Markdown) or the verdicts (JSON)."""
    head_results = load_results(head)
    comparison = compare(_baseline(base), head_results)
    text = comparison.model_dump_json(indent=2) if fmt == "json" else render_comment(comparison)
    if output:
        _write_output(output, lambda path: path.write_text(text, encoding="utf-8"))
    else:
        click.echo(text)
    if html_out is not None:
        _write_text(html_out, render_html(comparison), "HTML report")
    if junit is not None:
        _write_text(junit, junit_xml(comparison, head_results), "JUnit XML")
    sys.exit(comparison_exit_code(comparison))


if __name__ == "__main__":  # pragma: no cover
    main()

__all__ = ["EXIT_CONFIG", "main"]
