"""The GitHub Action: measure head and base, compare, comment, summarise, annotate, exit by policy.

Order: settings -> the base commit, whose threshold file decides how the head is measured
(endpoints, keys, policy; action/trust.py) -> head and base measured together (the base from the
data branch when a main-branch run stored it, else in a git worktree; one scheduler runs both
sides' model calls, and unchanged prompts come from the results cache at zero model calls) ->
compare -> sticky comment -> job summary -> outputs -> annotations -> exit.

Never crash on the things forks and locked-down repositories do: a read-only token (403) turns
the comment into a warning and the job summary stands in; a missing API key skips recall with a
note while budgets still run offline; an unreachable base commit runs without a baseline.

Exit codes: 0 pass, 1 checks failed (per the fail-on-* inputs), 2 config/usage error,
3 provider unavailable (only with ``fail-on-provider-outage: true`` and nothing else failing).
"""

from __future__ import annotations

import os
import sys
import time
import traceback
from pathlib import Path

from needle_action.action import databranch, trust, workflow
from needle_action.action.baseline import (
    BaselineUnavailable,
    base_side,
    ensure_commit,
    ensure_safe_directory,
    first_changed_line,
    resolve_commit,
)
from needle_action.action.publish import log, post_from_report, publish, workspace_relative
from needle_action.action.settings import Settings, load_settings
from needle_action.compare import Comparison, compare
from needle_action.config.model import Config
from needle_action.errors import EXIT_CHECKS_FAILED, NeedleError
from needle_action.pipeline import Measure, measure, measure_sides
from needle_action.recall.cache import ResultCache
from needle_action.report.sanitize import inline
from needle_action.results import Results, SkipKind


def run(settings: Settings) -> int:
    """Head and base (together), compare, publish: one pull request checked.

    The base commit is found first: its threshold file decides how the head is measured (endpoints,
    keys, policy; see action/trust.py)."""
    notes: list[str] = []
    if settings.data_branch:
        databranch.check_branch_name(settings.data_branch)
    base_sha, no_base = base_commit(settings, notes)
    trusted = trust.load_trusted(settings, base_sha, notes)
    cache = ResultCache(trust.cache_file(settings, notes))
    head_config = trust.head_config(settings, trusted, notes)
    head, base = measure_both(settings, head_config, (base_sha, no_base), cache, trusted, notes)
    if settings.data_branch and databranch.is_default_branch_push(settings) and head.commit:
        notes.append(databranch.store_or_explain(settings, head))
    comparison = compare(base, head)
    log(f"verdict: {comparison.verdict}")
    locate_failures(comparison, settings, head_config.root, base_sha if base is not None else None)
    return publish(settings, comparison, (head, base), base_sha, notes)


def _how(settings: Settings, config: Config) -> Measure:
    """The action's measuring; pushes that feed the data branch go through the batch API (half
    price, no pull request waiting on them) when CONFIG's providers all have one."""
    how = settings.measure
    if settings.data_branch and databranch.is_default_branch_push(settings) and how.recall:
        batch = all((how.overrides.provider or p.provider) == "anthropic" for p in config.prompts.values())
        how = Measure(recall=how.recall, overrides=how.overrides, batch=batch)
    return how


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
    log(f"measuring the head ({len(head_config.prompts)} prompt(s)) with {settings.config_path}")
    started = time.perf_counter()
    head: Results | None = None
    base_results: Results | None = None
    if base_sha is None and no_base:
        notes.append(f"No baseline: {no_base}")
        workflow.warning(f"needle: no baseline: {no_base}")
    try:
        if base_sha is not None and settings.data_branch:  # a main-branch run may have measured it
            base_results, note = databranch.load_base(settings, base_sha)
            notes.append(note)
            log(note)
        if base_sha is not None and base_results is None:
            log(f"measuring the base {base_sha[:12]} in a git worktree, together with the head")
            head, base_results = _measure_pair(settings, head_config, base_sha, cache, trusted, notes)
    except BaselineUnavailable as exc:
        notes.append(f"No baseline: {exc}")
        workflow.warning(f"needle: no baseline: {exc}")
        base_results = None
    if head is None:
        head = measure(head_config, _how(settings, head_config), env=os.environ, cache=cache)
    log(
        f"measured in {time.perf_counter() - started:.1f}s: head {head.totals.calls} model calls "
        f"({head.totals.cached_calls} cached)"
        + (
            f", base {base_results.totals.calls} ({base_results.totals.cached_calls} cached)"
            if base_results is not None
            else ""
        )
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
                [head_config, trust.for_base(base_config, trusted)],
                _how(settings, head_config),
                env=os.environ,
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


def _config_error(settings: Settings | None, exc: NeedleError) -> int:
    loc = exc.location
    workflow.error(exc.format(), file=workspace_relative(settings, loc.file), line=loc.line, title=exc.title)
    lines = "\n".join(f"> {inline(line, 500)}" for line in exc.format().splitlines())
    text = f"# needle: configuration error\n\n{lines}\n"  # the message may quote PR text: sanitised
    if settings is not None:
        workflow.append_summary(text, settings.summary_path)
        workflow.set_output("status", "error", settings.output_path)
    return exc.exit_code


def main(env: dict[str, str] | None = None) -> int:
    settings = None
    try:
        workflow.mask_secrets_in_env(env)
        settings = load_settings(env)
        if settings.post_report is not None:
            return post_from_report(settings, settings.post_report)
        return run(settings)
    except NeedleError as exc:
        return _config_error(settings, exc)
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # a bug of ours: say so plainly, keep the traceback in the log
        traceback.print_exc()
        workflow.error(
            f"needle-action internal error: {type(exc).__name__}: {exc}", title="needle internal error"
        )
        return EXIT_CHECKS_FAILED  # not the user's config: no exit 2; the check must not pass


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
