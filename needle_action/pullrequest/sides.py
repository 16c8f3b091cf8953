"""A pull request's two sides, measured the one way: the action and ``needle check --base-ref``.

Order: the base commit (resolved, fetched when the clone lacks it) -> its threshold file, read from
git, decides how the head is measured (endpoints, keys, policy; action/trust.py) -> head and base
measured together (the base from the data branch when a main-branch run stored it, else in a
detached git worktree that is removed afterwards, even on an error or Ctrl-C; one scheduler runs
both sides' model calls, and unchanged prompts come from the results cache at zero model calls).

The action publishes what :func:`measure_pull_request` returns; the CLI prints it and writes the
same comment. Both therefore give the same verdict on the same pair of commits.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

from needle_action.compare import Comparison, compare
from needle_action.config.model import Config
from needle_action.core import environment
from needle_action.core.errors import ConfigError, NeedleError
from needle_action.pipeline.measure import Measure, measure, measure_sides
from needle_action.providers.specs import spec
from needle_action.pullrequest import builder_env, databranch, trust
from needle_action.pullrequest.baseline import (
    BaselineUnavailable,
    base_side,
    ensure_commit,
    ensure_safe_directory,
    first_changed_line,
    git,
    resolve_commit,
)
from needle_action.pullrequest.settings import Settings, workspace_relative
from needle_action.results import Results, SkipKind
from needle_action.results.cache import ResultCache
from needle_action.tokens.budget import resolve_auto_budgets


@dataclass
class Sides:
    """What measuring a pull request produced: both sides' results and the notes for the comment."""

    head: Results
    base: Results | None
    base_sha: str | None  # the base commit; None: nothing to compare with (NOTES says why)
    head_config: Config
    notes: list[str] = field(default_factory=list)


def local_settings(config_path: Path, base_ref: str, how: Measure) -> Settings:
    """The settings ``needle check --base-ref`` measures with: the action's, as on a pull request
    whose base is BASE_REF and whose head is the working tree of the repository holding
    CONFIG_PATH. A folder outside git or a ref git cannot resolve is a usage error (exit 2)."""
    config_path = config_path.resolve()
    if not config_path.is_file():
        raise ConfigError(
            f"threshold file not found: {config_path}",
            hint="pass --config path/to/needle.toml, or run `needle init` to write one",
        )
    top = git(["rev-parse", "--show-toplevel"], config_path.parent, check=False)
    if top.returncode != 0:
        raise ConfigError(
            f"--base-ref needs a git repository, and {config_path.parent} is not in one",
            file=str(config_path),
            hint="run it inside the repository's checkout, or compare results files with `needle report`",
        )
    workspace = Path(top.stdout.strip())
    try:
        base_sha = resolve_commit(workspace, base_ref)
    except BaselineUnavailable as exc:
        raise ConfigError(
            f"--base-ref {base_ref!r}: {exc}",
            hint="name a commit, branch or tag of this repository, e.g. HEAD~1, main or origin/main",
        ) from None
    head = git(["rev-parse", "--verify", "--quiet", "HEAD^{commit}"], workspace, check=False).stdout.strip()
    o = how.overrides
    return Settings(
        config=str(config_path),
        base_ref=base_sha,
        workspace=workspace,
        sha=head or None,
        comment=False,
        recall=how.recall,
        seed=o.seed,
        trials=o.trials,
        provider=o.provider,
    )


def measure_pull_request(settings: Settings) -> Sides:
    """Head and base (together) of SETTINGS' comparison, judged under the trusted settings.

    Raises NeedleError for the user's mistakes (a bad threshold file, a bad data-branch name);
    a base that cannot be measured is a note, and the head is judged on its own."""
    notes: list[str] = []
    if settings.data_branch:
        databranch.check_branch_name(settings.data_branch)
    base_sha, no_base = base_commit(settings, notes)
    trusted = trust.load_trusted(settings, base_sha, notes)
    cache = ResultCache(trust.cache_file(settings, notes))
    head_config = trust.head_config(settings, trusted, notes)
    with builder_env.head_side(settings, head_config, base_sha, notes) as head_config:
        head, base = measure_both(settings, head_config, (base_sha, no_base), cache, trusted, notes)
    resolve_auto_budgets(head, base)
    return Sides(head, base, base_sha, head_config, notes)


def compare_sides(settings: Settings, sides: Sides) -> Comparison:
    """Head against base, each failure pointed at its template relative to the repository, at the
    first line that differs from the base (the action's annotations; the comment names it too)."""
    comparison = compare(sides.base, sides.head)
    locate_failures(comparison, settings, sides.head_config.root, sides.base_sha if sides.base else None)
    return comparison


def locate_failures(
    comparison: Comparison, settings: Settings, config_root: Path, base_sha: str | None
) -> None:
    """Point each failure at the template relative to the repository, at the first changed line."""
    for f in comparison.failures:
        if not f.file:
            continue
        f.file = workspace_relative(settings, str(config_root / f.file))
        if base_sha and f.file:
            f.line = first_changed_line(settings.workspace, base_sha, f.file) or f.line


def measure_how(settings: Settings, config: Config) -> Measure:
    """The action's measuring; pushes that feed the data branch go through the batch API (half
    price, no pull request waiting on them) when CONFIG's providers all have one."""
    how = settings.measure
    if settings.data_branch and databranch.is_default_branch_push(settings) and how.recall:
        batch = all(spec(how.overrides.provider or p.provider).batch for p in config.prompts.values())
        how = Measure(recall=how.recall, overrides=how.overrides, batch=batch)
    return how


def _no_base(settings: Settings, why: str, notes: list[str]) -> None:
    notes.append(f"No baseline: {why}")
    settings.notices.warn(f"no baseline: {why}")


def measure_both(
    settings: Settings,
    head_config: Config,
    base: tuple[str | None, str | None],
    cache: ResultCache,
    trusted: trust.Trusted,
    notes: list[str],
) -> tuple[Results, Results | None]:
    """The head's results and the base's (data branch, else a git worktree measured in the same
    scheduler run as the head); the base is None when there is none (NOTES says why). BASE is
    (the base commit or None, why there is none when there should be one)."""
    base_sha, no_base = base
    settings.notices.say(
        f"measuring the head ({len(head_config.prompts)} prompt(s)) with {settings.config_path}"
    )
    started = time.perf_counter()
    head: Results | None = None
    base_results: Results | None = None
    if base_sha is None and no_base:
        _no_base(settings, no_base, notes)
    try:
        if base_sha is not None and settings.data_branch:  # a main-branch run may have measured it
            base_results, note = databranch.load_base(settings, base_sha)
            notes.append(note)
            settings.notices.say(note)
        if base_sha is not None and base_results is None:
            settings.notices.say(
                f"measuring the base {base_sha[:12]} in a git worktree, together with the head"
            )
            head, base_results = _measure_pair(settings, head_config, base_sha, cache, trusted, notes)
    except BaselineUnavailable as exc:
        _no_base(settings, str(exc), notes)
        base_results = None
    if head is None:
        how = measure_how(settings, head_config)
        # a stored base is another run's: the data branch's main-branch runs tell how far runs differ
        stored, problem = databranch.load_history(settings) if base_results is not None else ([], None)
        if problem:  # said, not swallowed: the test then rests on the stated prior
            notes.append(problem)
        head = measure(
            head_config,
            how,
            env=environment.process(),
            cache=cache,
            baseline=base_results,
            history=stored or None,
        )
    base_calls = (
        f", base {base_results.totals.calls} ({base_results.totals.cached_calls} cached)"
        if base_results is not None
        else ""
    )
    settings.notices.say(
        f"measured in {time.perf_counter() - started:.1f}s: head {head.totals.calls} model calls "
        f"({head.totals.cached_calls} cached){base_calls}",
    )
    _head_notes(settings, head, notes)
    return head, base_results


def base_commit(settings: Settings, notes: list[str]) -> tuple[str | None, str | None]:
    """(the base commit, fetched, or None; why there is none when there should be one)."""
    pr = settings.pull_request
    ref = settings.base_ref or (pr.base_sha if pr else None)
    try:
        ensure_safe_directory(settings.workspace, force=settings.in_actions)
    except BaselineUnavailable as exc:
        if ref:
            return None, str(exc)
    if not ref:
        notes.append("Not a pull request and no `base-ref` input: nothing to compare with.")
        return None, None
    try:
        sha = resolve_commit(settings.workspace, ref) if settings.base_ref else ref
        ensure_commit(settings.workspace, sha)
    except BaselineUnavailable as exc:
        return None, str(exc)
    return sha, None


def _measure_pair(
    settings: Settings,
    head_config: Config,
    base_sha: str,
    cache: ResultCache,
    trusted: trust.Trusted,
    notes: list[str],
) -> tuple[Results, Results]:
    """Head and base through one scheduler; the base checked out in a worktree and measured with
    its own threshold file (trusted), or the head's with the trusted settings applied."""
    with base_side(settings.workspace, base_sha, settings.config_path) as (base_config, note):
        try:
            head, base = measure_sides(
                [head_config, builder_env.base_side(settings, trust.for_base(base_config, trusted), notes)],
                measure_how(settings, head_config),
                env=environment.process(),
                cache=cache,
            )
        except NeedleError as exc:
            # which side failed is unknown here: measure the head alone, judge it without a baseline
            raise BaselineUnavailable(f"the base could not be measured: {exc.message}") from None
    base.commit = base_sha
    if note:
        notes.append(note)
    return head, base


def _head_notes(settings: Settings, head: Results, notes: list[str]) -> None:
    pr = settings.pull_request
    head.commit = pr.head_sha if pr else settings.sha
    no_key = sorted({p.recall_skipped or "" for p in head.prompts if p.recall_skip_kind == SkipKind.NO_KEY})
    notes.extend(s[0].upper() + s[1:] + "." for s in no_key if s)


__all__ = [
    "Sides",
    "base_commit",
    "local_settings",
    "measure_both",
    "measure_how",
    "measure_pull_request",
]
