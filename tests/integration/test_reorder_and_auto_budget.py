"""Issue 11 part B on the fake provider, through the action: ``max_input_tokens = "auto"`` takes
its budget from the base's measured effective context and the comment says so; ``reorder_ab``
runs the middle depths again with the documents dealt by ``edge_order`` (one more plan in the same
scheduler) and the comment shows the gain. The simulated model is lost in the middle and reads the
needle's depth from the request text itself, so dealing the documents to the edges really helps."""

from __future__ import annotations

import re

import pytest

from tests.fakes.anthropic_server import FakeAnthropic
from tests.fakes.github_server import FakeGitHub
from tests.fakes.simulated_model import SimulatedModel
from tests.integration.action_runner import (
    CONFIG,
    PR,
    REPO,
    make_checkout,
    report_json,
    run_action,
    runner_env,
)

# rag_answer (documents: a list slot) is lost in the middle and measures the reorder; support_agent
# holds at both edges, so its effective context is measured and its budget is "auto"
AUTO_AB = (
    CONFIG.format(growth="10%")
    .replace(
        "depths = [0.0, 0.5, 1.0]\ntrials = 10\nthreshold = 0.8",
        "depths = [0.0, 0.5, 1.0]\ntrials = 12\nthreshold = 0.5\nreorder_ab = true",
    )
    .replace(
        'question_var = "customer_message"\nmax_input_tokens = 6000',
        'question_var = "customer_message"\nmax_input_tokens = "auto"',
    )
    + "\n[prompts.support_agent.recall]\nenabled = true\nsizes = [1500]\ndepths = [0.0, 1.0]\ntrials = 6\nseed = 3\n"
)


def lost_in_the_middle(depth: float, size: int) -> float:
    """Rarely found between 50% and 80% of the request text, else found: depth 0.5 of the documents
    sits at about 0.6 of this request, and edge_order deals it to about 0.35."""
    return 0.1 if 0.5 <= depth <= 0.8 else 0.95


@pytest.mark.slow  # an action run measuring recall with a second arm
def test_auto_budget_and_the_reorder_ab_appear_in_the_comment(tmp_path):
    assert 'max_input_tokens = "auto"' in AUTO_AB
    assert "reorder_ab = true" in AUTO_AB
    p = make_checkout(tmp_path, base_config=AUTO_AB)
    with FakeAnthropic(SimulatedModel(lost_in_the_middle, seed=5)) as fake, FakeGitHub() as gh:
        run = run_action(p, runner_env(p, gh, fake))
        (comment,) = gh.issue_comments(REPO, PR)
    assert run.code == 0, run.stdout + run.stderr
    body = comment["body"]
    head = report_json(run, "head")
    rag = next(x for x in head["prompts"] if x["name"] == "rag_answer")

    # the B arm: depth 0.5 only (the edges are already at the edges), same trials, paired needles
    (row,) = rag["recall"]["reorder_ab"]
    assert row["depth"] == 0.5
    assert row["trials"] == row["edge_trials"] == 12
    assert row["edge_rate"] > row["rate"] + 0.3  # lost in the middle, found near the edges
    cells = sum(c["trials"] for c in rag["recall"]["cells"])
    assert rag["recall"]["calls"] == cells + row["edge_trials"]  # the arm's calls are counted
    lift = f"edge_order would lift depth 0.5 from {round(row['rate'] * 100)}% to {round(row['edge_rate'] * 100)}%"
    assert lift in body
    assert "Reorder measured" in body

    # auto: the base's effective context, the reserve, and the base commit it came from
    base = report_json(run, "base")
    eff = next(x for x in base["prompts"] if x["name"] == "support_agent")["recall"]["effective_context"]
    assert eff == 1500
    (case,) = next(x for x in head["prompts"] if x["name"] == "support_agent")["cases"]
    assert case["max_input_tokens"] == eff
    assert case["headroom"] == eff - case["count"]["tokens"] - 256
    source = f"auto: effective context {eff:,} − 256 output reserve, from base {p.base_sha[:7]}"
    assert case["budget_source"] == source
    assert source in body
    assert re.search(rf"\| {eff:,} \(auto\)", body)
