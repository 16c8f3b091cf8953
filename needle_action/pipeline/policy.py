"""Verdict -> exit code: the one policy both faces (the ``needle`` CLI and the action) apply.

0 pass, 1 checks failed, 2 config or usage error (raised as :class:`~needle_action.core.errors.NeedleError`),
3 provider unavailable. A real failure wins over an outage: it is the more useful signal.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from needle_action.compare import Comparison
from needle_action.core.errors import EXIT_CHECKS_FAILED, EXIT_OK, EXIT_PROVIDER
from needle_action.results import Results


@dataclass(frozen=True)
class Policy:
    """Which findings fail the check (the action's ``fail-on-*`` inputs; the CLI uses the defaults)."""

    fail_on_budget: bool = True
    fail_on_recall_regression: bool = True
    fail_on_provider_outage: bool = False


def exit_code(*, failed: bool, outage: bool, outage_fails: bool) -> int:
    """The exit code for a run that FAILED or not, and whose provider was unavailable (OUTAGE)."""
    if failed:
        return EXIT_CHECKS_FAILED
    if outage and outage_fails:
        return EXIT_PROVIDER
    return EXIT_OK


def comparison_failed(comparison: Comparison, policy: Policy = Policy()) -> bool:
    return comparison.failed_under(
        fail_on_budget=policy.fail_on_budget,
        fail_on_recall_regression=policy.fail_on_recall_regression,
    )


def comparison_exit_code(comparison: Comparison, policy: Policy = Policy()) -> int:
    """``needle report`` and the action: exit by the comparison of head with base."""
    return exit_code(
        failed=comparison_failed(comparison, policy),
        outage=comparison.provider_outage,
        outage_fails=policy.fail_on_provider_outage,
    )


def results_exit_code(results: Results, *, stages: Collection[str]) -> int:
    """``needle budget`` / ``recall`` / ``check``: exit by one side's results.

    A recall run cut short never passes: 3 when the provider stopped it (an outage), else 1 (a
    cap stopped the planned trials). An outage where no prompt's recall ran at all exits 3.
    """
    recall = "recall" in stages
    failed = ("budget" in stages and results.budget_status in ("fail", "error")) or (
        recall and results.recall_status in ("fail", "error")
    )
    nothing_ran = not any(p.recall is not None for p in results.prompts)
    outage = recall and results.totals.provider_unavailable
    cut_short = recall and results.recall_status == "partial"
    if cut_short and not outage:
        failed = True
    return exit_code(failed=failed, outage=outage, outage_fails=nothing_ran or cut_short)
