"""``max_input_tokens = "auto"``: the budget is the base's measured effective context (the request
plus its output reserve must fit in it), and the comment says where the number came from."""

from __future__ import annotations

import pytest

from needle_action.compare import compare
from needle_action.config.model import PromptSettings
from needle_action.report.render import render_comment
from needle_action.tokens.budget import auto_budget, resolve_auto_budgets
from tests.unit._results_builder import case, grid, prompt, recall, results


def _auto(tokens: int, reserve: int = 1024):
    c = case(tokens, max_input=None, reserve=reserve, growth=None)
    c.budget_source = "auto"
    return c


def _base(effective: int | None):
    rec = recall(grid({0.0: (5, 5), 0.5: (5, 5), 1.0: (5, 5)}, sizes=(4000, 12000)))
    rec.effective_context = effective
    return results(
        prompt("rag", [case(9000, max_input=None, growth=None)], rec=rec), commit="abc1234" + "0" * 33
    )


def test_auto_takes_the_base_effective_context_and_fails_over_it():
    head = results(prompt("rag", [_auto(11_500)]), commit="f" * 40)
    resolve_auto_budgets(head, _base(12_000))
    (c,) = head.prompts[0].cases
    assert c.max_input_tokens == 12_000
    assert c.headroom == 12_000 - 11_500 - 1024
    assert c.status == "fail"
    assert c.reasons[0].startswith("11,500 + 1,024 reserved > 12,000 budget")
    assert c.budget_source == "auto: effective context 12,000 − 1,024 output reserve, from base abc1234"

    body = render_comment(compare(_base(12_000), head))
    assert "12,000 (auto)" in body
    assert "auto: effective context 12,000 − 1,024 output reserve, from base abc1234" in body
    assert "Token budget exceeded" in body


@pytest.mark.parametrize(
    ("base", "why"),
    [
        (None, "no base results"),
        (_base(None), "held at none of the measured sizes"),
        (results(prompt("rag", [case(9000)]), commit="abc1234" + "0" * 33), "no recall results"),
    ],
)
def test_without_a_measured_base_there_is_no_budget_and_the_comment_says_why(base, why):
    head = results(prompt("rag", [_auto(50_000)]))
    resolve_auto_budgets(head, base)
    (c,) = head.prompts[0].cases
    assert c.max_input_tokens is None
    assert c.status == "pass"
    assert why in (c.budget_source or "")
    comparison = compare(base, head)
    assert not comparison.failed
    assert why in render_comment(comparison)


def test_a_case_with_a_budget_is_left_alone_and_auto_is_the_only_word_allowed():
    fixed = case(11_500, max_input=20_000)
    head = results(prompt("rag", [fixed]))
    resolve_auto_budgets(head, _base(12_000))
    assert fixed.max_input_tokens == 20_000
    assert fixed.budget_source is None
    assert auto_budget(None, 10, None)[0] is None
    assert PromptSettings(max_input_tokens="auto").max_input_tokens == "auto"
    with pytest.raises(ValueError, match="unable to parse string"):
        PromptSettings(max_input_tokens="lots")
    with pytest.raises(ValueError, match="at least 1"):
        PromptSettings(max_input_tokens=0)


def test_a_word_other_than_auto_is_an_error_at_its_line_that_names_auto(tmp_path):
    from needle_action.config.loader import load_config
    from needle_action.core.errors import ConfigError
    from tests.builders import Project

    project = Project(tmp_path).template("p/a.j2", "user:\nhi\n")
    project.config('[defaults]\nmax_input_tokens = "lots"\n\n[prompts.a]\ntemplate = "p/a.j2"\n')
    with pytest.raises(ConfigError) as err:
        load_config(project.config_path)
    assert err.value.location.line == 2
    assert 'max_input_tokens = "auto"' in (err.value.hint or "")
