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

import sys
import traceback

from needle_action.action import workflow
from needle_action.action.publish import log, post_from_report, publish
from needle_action.action.settings import load_settings
from needle_action.assemble.builder import client as builders
from needle_action.compare import Comparison, history
from needle_action.core.errors import EXIT_CHECKS_FAILED, NeedleError
from needle_action.pipeline.measure import freeze_at_exit
from needle_action.pullrequest import databranch
from needle_action.pullrequest.settings import Settings, workspace_relative
from needle_action.pullrequest.sides import compare_sides, measure_pull_request
from needle_action.report.sanitize import inline
from needle_action.results import Results


def run(settings: Settings) -> int:
    """Head and base (together), compare, publish: one pull request checked.

    The base commit is found first: its threshold file decides how the head is measured (endpoints,
    keys, policy; see action/trust.py). Measuring is shared with ``needle check --base-ref``
    (needle_action/pullrequest/sides.py), so the CLI previews exactly this verdict."""
    sides = measure_pull_request(settings)
    head, base, notes = sides.head, sides.base, sides.notes
    if settings.data_branch and databranch.is_default_branch_push(settings) and head.commit:
        notes.append(databranch.store_or_explain(settings, head))
    comparison = compare_sides(settings, sides)
    if settings.data_branch and settings.pull_request is not None:
        _add_trend(settings, comparison, head, notes)
    log(f"verdict: {comparison.verdict}")
    _builder_times()
    return publish(settings, comparison, (head, base), sides.base_sha, notes)


def _builder_times() -> None:
    """Each builder's mean time per call in the log, and a warning annotation for a slow one."""
    lines, warnings = builders.timing_report()
    if lines:
        with workflow.stop_commands():  # the builders' names are the pull request's text
            for line in lines:
                log(line)
    for text in warnings:
        workflow.warning(text, title="needle: a slow prompt builder")


def _add_trend(settings: Settings, comparison: Comparison, head: Results, notes: list[str]) -> None:
    """The main-branch trend of every prompt (data branch), this head last."""
    runs, problem = databranch.load_history(settings)
    if problem and problem not in notes:  # measuring may have said it already
        notes.append(problem)
    comparison.history = history.pr_trends(runs, head)


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
    freeze_at_exit()
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
