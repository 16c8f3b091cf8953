"""The comment and the terminal say what prompt caching saved, from the usage the API reported."""

from __future__ import annotations

from click.testing import CliRunner

from needle_action.compare import compare
from needle_action.report.render import render_comment
from needle_action.report.terminal import print_recall
from needle_action.results import TokenUsage
from tests.unit._results_builder import case, grid, prompt, recall, results


def _with_usage():
    head = results(prompt("rag", [case(1000)], rec=recall(grid({0.0: (5, 5), 0.5: (5, 5), 1.0: (5, 5)}))))
    usage = TokenUsage(
        input_tokens=40_000,
        cache_write_tokens=10_000,
        cache_read_tokens=150_000,
        output_tokens=900,
        billed_input_tokens=40_000 + 1.25 * 10_000 + 0.1 * 150_000,
        uncached_cost_usd=0.6135,
    )
    head.prompts[0].recall.usage = usage
    head.prompts[0].recall.cost_usd = 0.2160
    head.totals.usage = usage.model_copy()
    head.totals.cost_usd = 0.2160
    return head


def test_the_comment_shows_billed_tokens_and_savings():
    text = render_comment(compare(None, _with_usage()))
    assert "Input tokens billed: 67,500 of 200,000 sent (prompt caching), $0.2160 instead of $0.6135." in text


def test_the_terminal_shows_them_too():
    import click

    runner = CliRunner()

    @click.command()
    def show():
        print_recall(_with_usage())

    out = runner.invoke(show).output
    assert "input billed 67,500 of 200,000 tokens (prompt caching), $0.2160 instead of $0.6135" in out


def test_nothing_is_claimed_without_a_cache():
    head = results(prompt("rag", [case(1000)], rec=recall(grid({0.0: (5, 5)}))))
    assert "Input tokens billed" not in render_comment(compare(None, head))
