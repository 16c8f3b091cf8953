"""The GitHub Action: measure head and base, compare, comment, summarise, annotate, exit by policy.

Order: settings -> head run -> base run (worktree; unchanged prompts come from the results cache
at zero model calls) -> compare -> sticky comment -> job summary -> outputs -> annotations -> exit.

Never crash on the things forks and locked-down repositories do: a read-only token (403) turns
the comment into a warning and the job summary stands in; a missing API key skips recall with a
note while budgets still run offline; an unreachable base commit runs without a baseline.

Exit codes: 0 pass, 1 checks failed (per the fail-on-* inputs), 2 config/usage error,
3 provider unavailable (only with ``fail-on-provider-outage: true`` and nothing else failing).
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from pathlib import Path

from needle_action.action import workflow
from needle_action.action.settings import Settings, load_settings
from needle_action.errors import EXIT_CHECKS_FAILED, EXIT_OK, EXIT_PROVIDER, NeedleError
from needle_action.paths import relative

SUMMARY_LIMIT = 1_000_000
KEY_ENV = {"anthropic": "ANTHROPIC_API_KEY", "openai": "OPENAI_API_KEY"}


def log(message: str) -> None:
    print(message, flush=True)


# --------------------------------------------------------------------------- measuring


def var_set_explicitly(ps) -> bool:
    return bool(ps and ps.api_key_env)


def missing_key(prompt, settings: Settings, env: dict[str, str]) -> str | None:
    """Why recall cannot run for PROMPT for lack of a key, or None when it can try."""
    provider = settings.provider or prompt.provider
    if provider == "local":
        return None
    ps = prompt.providers.get(provider)
    var = (ps.api_key_env if ps and ps.api_key_env else None) or KEY_ENV.get(provider)
    if provider == "openai" and ps and ps.base_url and not ps.api_key_env:
        return None  # an OpenAI-compatible server of your own (vLLM, Ollama) may need no key
    if provider == "anthropic" and not var_set_explicitly(ps) and env.get("ANTHROPIC_AUTH_TOKEN"):
        return None  # the SDK also accepts a bearer token
    if var and not env.get(var):
        return (
            f"recall skipped: {var} is not set (pull requests from forks get no secrets); "
            "budgets still ran offline"
        )
    return None


def measure(config, settings: Settings, cache, *, env: dict[str, str] | None = None):
    """Budgets for every prompt, recall for those that can run it. Returns Results."""
    from needle_action.pipeline import RecallOverrides, run_budget, run_recall

    env = dict(os.environ if env is None else env)
    results = run_budget(config)
    if not settings.recall:
        for pr in results.prompts:
            pr.recall_skipped = "recall disabled (input `recall: false`)"
        return results
    runnable = []
    for name, prompt in config.prompts.items():
        reason = missing_key(prompt, settings, env)
        if reason:
            pr = results.prompt(name)
            if pr is not None:
                pr.recall_skipped = reason
        else:
            runnable.append(name)
    if runnable:
        overrides = RecallOverrides(seed=settings.seed, provider=settings.provider, trials=settings.trials)
        run_recall(config, only=runnable, overrides=overrides, results=results, cache=cache)
    return results


# --------------------------------------------------------------------------- publishing


def post_comment(settings: Settings, body: str) -> tuple[str | None, str | None]:
    """Upsert the sticky comment. Returns (url, problem); never raises for API trouble."""
    from needle_action.action.github import GitHubClient, GitHubError, GitHubForbidden, GitHubUnprocessable
    from needle_action.report.render import MARKER

    pr = settings.pull_request
    if not settings.comment:
        return None, None
    if pr is None:
        return None, "not a pull_request event: no PR comment (the job summary has the report)"
    if not settings.github_token or not settings.repository:
        return None, "no github-token or GITHUB_REPOSITORY: no PR comment"
    try:
        client = GitHubClient(settings.github_token, api_url=settings.api_url, repository=settings.repository)
        comment, created = client.upsert_sticky_comment(pr.number, body, MARKER)
        log(f"{'posted' if created else 'updated'} the PR comment: {comment.html_url}")
        return comment.html_url, None
    except GitHubForbidden:
        why = "this pull request comes from a fork" if pr.from_fork else "the token is read-only"
        return None, (
            f"could not comment on the pull request: {why} (GitHub answered 403). Give the job "
            "`permissions: pull-requests: write`, or for forks use the workflow_run pattern in "
            "docs/action.md. The job summary stands in."
        )
    except GitHubUnprocessable as exc:
        return None, f"GitHub rejected the comment (422: {exc.message}); the job summary stands in."
    except GitHubError as exc:
        return None, f"could not comment on the pull request ({exc}); the job summary stands in."


def write_report(settings: Settings, files: dict[str, str]) -> Path:
    out = settings.report_dir
    out.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (out / name).write_text(text, encoding="utf-8")
    return out


def token_delta_lines(comparison) -> str:
    lines = []
    for p in comparison.prompts:
        for t in p.tokens:
            where = f"{p.name}[{t.fixture}]" if t.fixture else p.name
            delta = (
                "new"
                if t.delta is None and t.base_tokens is None
                else ("deleted" if t.head_tokens is None else f"{t.delta:+d}")
            )
            lines.append(
                f"{where}: {t.base_tokens if t.base_tokens is not None else '-'} -> "
                f"{t.head_tokens if t.head_tokens is not None else '-'} ({delta})"
            )
    return "\n".join(lines)


def recall_verdict(comparison) -> str:
    statuses = [p.recall.status for p in comparison.prompts if p.recall is not None]
    for s in ("fail", "inconclusive", "pass"):
        if s in statuses:
            return "regressed" if s == "fail" else s
    return "skipped"


def exit_code(comparison, settings: Settings) -> int:
    if comparison.failed_under(
        fail_on_budget=settings.fail_on_budget, fail_on_recall_regression=settings.fail_on_recall_regression
    ):
        return EXIT_CHECKS_FAILED
    if comparison.provider_outage and settings.fail_on_provider_outage:
        return EXIT_PROVIDER
    return EXIT_OK


def _config_error(settings: Settings | None, exc: NeedleError) -> int:
    loc = exc.location
    workflow.error(exc.format(), file=_rel(settings, loc.file), line=loc.line, title=exc.title)
    from needle_action.report.sanitize import inline

    lines = "\n".join(f"> {inline(line, 500)}" for line in exc.format().splitlines())
    text = f"# needle: configuration error\n\n{lines}\n"  # the message may quote PR text: sanitised
    if settings is not None:
        workflow.append_summary(text, settings.summary_path)
        workflow.set_output("status", "error", settings.output_path)
    return exc.exit_code


def _rel(settings: Settings | None, file: str | None) -> str | None:
    if not file or settings is None:
        return file
    return relative(settings.workspace, Path(file), resolved=True, default=file)


def locate_failures(comparison, settings: Settings, config_root: Path, base_sha: str | None) -> None:
    """Point each failure at the template relative to the repository, at the first changed line."""
    from needle_action.action.baseline import first_changed_line

    for f in comparison.failures:
        if not f.file:
            continue
        f.file = _rel(settings, str(config_root / f.file))
        if base_sha:
            f.line = first_changed_line(settings.workspace, base_sha, f.file) or f.line


# --------------------------------------------------------------------------- main


def run(settings: Settings) -> int:
    from needle_action.action import databranch
    from needle_action.action.baseline import (
        BaselineUnavailable,
        ensure_safe_directory,
        measure_base,
        resolve_commit,
    )
    from needle_action.compare.verdict import compare
    from needle_action.config.loader import load_config
    from needle_action.recall.cache import ResultCache
    from needle_action.report.render import render_comment, render_summary

    notes: list[str] = []
    if settings.data_branch:
        databranch.check_branch_name(settings.data_branch)
    cache_dir = settings.resolved_cache_dir
    cache = ResultCache(cache_dir / "recall.sqlite")

    # head
    head_config = load_config(settings.config_path)
    log(f"measuring the head ({len(head_config.prompts)} prompt(s)) with {settings.config_path}")
    started = time.perf_counter()
    head = measure(head_config, settings, cache)
    log(
        f"head measured in {time.perf_counter() - started:.1f}s: {head.totals.calls} model calls, "
        f"{head.totals.cached_calls} cached"
    )
    pr = settings.pull_request
    head.commit = pr.head_sha if pr else settings.sha
    skipped = sorted(
        {p.recall_skipped for p in head.prompts if p.recall_skipped and "not set" in p.recall_skipped}
    )
    notes.extend(s[0].upper() + s[1:] + "." for s in skipped)

    # base
    base = None
    base_sha = settings.base_ref or (pr.base_sha if pr else None)
    if base_sha:
        try:
            ensure_safe_directory(settings.workspace, force=settings.in_actions)
            if settings.base_ref:
                base_sha = resolve_commit(settings.workspace, settings.base_ref)
            if settings.data_branch:  # a main-branch run may have measured the base already
                base, note = databranch.load_base(settings, base_sha)
                notes.append(note)
                log(note)
            if base is None:
                log(f"measuring the base {base_sha[:12]} in a git worktree")
                base, note = measure_base(
                    settings.workspace,
                    base_sha,
                    settings.config_path,
                    lambda cfg: measure(cfg, settings, cache),
                )
                if note:
                    notes.append(note)
                log(f"base measured: {base.totals.calls} model calls, {base.totals.cached_calls} cached")
        except BaselineUnavailable as exc:
            notes.append(f"No baseline: {exc}")
            workflow.warning(f"needle: no baseline: {exc}")
    else:
        notes.append("Not a pull request and no `base-ref` input: nothing to compare with.")
    if settings.data_branch and databranch.is_default_branch_push(settings) and head.commit:
        notes.append(databranch.store_or_explain(settings, head))

    comparison = compare(base, head)
    log(f"verdict: {comparison.verdict}")
    locate_failures(comparison, settings, head_config.root, base_sha if base is not None else None)

    # comment, then the summary (which says whether the comment made it)
    comment_body = render_comment(comparison, summary_url=settings.summary_url, notes=notes)
    url, problem = post_comment(settings, comment_body)
    summary_notes = list(notes)
    if problem:
        workflow.warning(f"needle: {problem}")
        summary_notes.append(problem.rstrip(".") + ".")
    summary = render_summary(comparison, notes=summary_notes)
    if len(summary) > SUMMARY_LIMIT:  # GitHub drops a step summary above 1 MiB altogether
        summary = render_comment(comparison, notes=summary_notes, max_chars=SUMMARY_LIMIT)
    workflow.append_summary(summary, settings.summary_path)

    pr_info = {
        "number": pr.number if pr else None,
        "head_sha": head.commit,
        "base_sha": base_sha,
        "notes": notes,
    }
    files = {
        "head.json": head.model_dump_json(indent=2),
        "comparison.json": comparison.model_dump_json(indent=2),
        "comment.md": comment_body,
        "summary.md": summary,
        "pr.json": json.dumps(pr_info, indent=2),
    }
    if base is not None:
        files["base.json"] = base.model_dump_json(indent=2)
    report = write_report(settings, files)

    outputs = {
        "status": comparison.verdict,
        "failed": str(
            comparison.failed_under(
                fail_on_budget=settings.fail_on_budget,
                fail_on_recall_regression=settings.fail_on_recall_regression,
            )
        ).lower(),
        "token-deltas": token_delta_lines(comparison),
        "recall-verdict": recall_verdict(comparison),
        "report-path": _rel(settings, str(report)) or str(report),  # relative: valid on the host too
        "comment-url": url or "",
    }
    for name, value in outputs.items():
        workflow.set_output(name, value, settings.output_path)

    for f in comparison.failures:
        workflow.error(f.message, file=f.file, line=f.line, title=f.title)
    code = exit_code(comparison, settings)
    log(f"needle: {comparison.headline} (exit {code})")
    return code


MAX_REPORT_BYTES = 20 * 1024 * 1024


def post_from_report(settings: Settings) -> int:
    """The privileged half of the fork pattern (``on: workflow_run``): post the comment of a report
    that an unprivileged ``pull_request`` run uploaded as an artifact.

    The artifact is attacker-controlled (a fork can change the workflow that made it), so nothing in
    it is posted as is: ``comparison.json`` must validate against the Comparison model and is
    rendered again through our sanitising templates, and the PR number it names must belong to the
    commit this workflow_run was triggered by (checked with the API).
    """
    from needle_action.action.github import GitHubClient, GitHubError
    from needle_action.compare.verdict import Comparison
    from needle_action.report.render import MARKER, render_comment, render_summary

    folder = settings.post_report
    run = settings.event.get("workflow_run") or {}
    head_sha = run.get("head_sha")
    try:
        raw = (folder / "comparison.json").read_bytes()
        info = json.loads((folder / "pr.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise NeedleError(
            f"post-report: cannot read the report: {exc}",
            file=str(folder),
            hint="download the artifact the pull_request workflow uploaded first",
        ) from None
    if len(raw) > MAX_REPORT_BYTES:
        raise NeedleError("post-report: comparison.json is implausibly large", file=str(folder))
    try:
        comparison = Comparison.model_validate_json(raw)
        number = int(info["number"])
        notes = [str(n) for n in info.get("notes") or []][:20]
    except Exception as exc:  # pydantic, KeyError, TypeError, ValueError: all mean "not our report"
        raise NeedleError(f"post-report: not a needle report: {str(exc)[:300]}", file=str(folder)) from None
    listed = [p.get("number") for p in run.get("pull_requests") or []]
    if listed and number not in listed:
        raise NeedleError(f"post-report: the report names PR #{number}, the workflow run is for {listed}")
    if not settings.github_token or not settings.repository:
        raise NeedleError("post-report needs github-token and GITHUB_REPOSITORY")
    client = GitHubClient(settings.github_token, api_url=settings.api_url, repository=settings.repository)
    try:
        pull = client.get_pull(number)
        if not head_sha or (pull.get("head") or {}).get("sha") != head_sha:
            raise NeedleError(
                f"post-report: PR #{number} is not at the commit this workflow run tested "
                f"({str(head_sha)[:12]}); not posting",
                hint="the PR may have moved on: a newer run will post",
            )
        body = render_comment(comparison, summary_url=settings.summary_url, notes=notes)
        comment, created = client.upsert_sticky_comment(number, body, MARKER)
    except GitHubError as exc:
        workflow.warning(f"needle: could not post the comment: {exc}")
        return EXIT_CHECKS_FAILED
    log(f"{'posted' if created else 'updated'} the PR comment: {comment.html_url}")
    workflow.append_summary(render_summary(comparison, notes=notes), settings.summary_path)
    workflow.set_output("status", comparison.verdict, settings.output_path)
    workflow.set_output("comment-url", comment.html_url, settings.output_path)
    return EXIT_OK


def main(env: dict[str, str] | None = None) -> int:
    settings = None
    try:
        workflow.mask_secrets_in_env(env)
        settings = load_settings(env)
        if settings.post_report is not None:
            return post_from_report(settings)
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
