"""compare(): prompt statuses, token verdicts and tiers, recall significance per cell, headline."""

from __future__ import annotations

import json
import math

import pytest

from needle_action.compare import compare
from needle_action.compare.recall import min_achievable_pvalue
from needle_action.recall.stats import fisher_drop_pvalue
from needle_action.results import SkipKind
from tests.unit._results_builder import case, grid, prompt, recall, results

FULL = {0.0: (5, 5), 0.5: (5, 5), 1.0: (5, 5)}


def test_fisher_matches_hypergeometric_by_hand():
    # base 5/5, head 0/5: only one table that extreme -> 1 / C(10, 5)
    assert fisher_drop_pvalue(5, 5, 0, 5) == pytest.approx(1 / math.comb(10, 5))
    # base 5/5, head 3/5: P(X<=3) with 8 hits among 10, 5 drawn for head
    expect = sum(math.comb(8, k) * math.comb(2, 5 - k) for k in (3,)) / math.comb(10, 5)
    assert fisher_drop_pvalue(5, 5, 3, 5) == pytest.approx(expect)
    assert fisher_drop_pvalue(3, 5, 5, 5) == pytest.approx(1.0)  # head better: no evidence of a drop
    assert min_achievable_pvalue(2, 2) == pytest.approx(1 / 6)


def test_unchanged_new_deleted_renamed_changed():
    base = results(
        prompt("a", [case(100, h="A")]),
        prompt("b", [case(200, h="B")]),
        prompt("old_name", [case(300, h="R")], template="p/r.j2"),
        prompt("moved", [case(50, h="M1")], template="p/moved.j2"),
        prompt("gone", [case(10, h="G")], template="p/gone.j2"),
    )
    head = results(
        prompt("a", [case(100, h="A")]),
        prompt("b", [case(205, h="B2")]),
        prompt("new_name", [case(300, h="R")], template="p/r2.j2"),  # same content, new path
        prompt("moved_too", [case(52, h="M2")], template="p/moved.j2"),  # same path, new name
        prompt("fresh", [case(10, h="F")]),
    )
    c = compare(base, head)
    status = {p.name: p.status for p in c.prompts}
    assert status == {
        "a": "unchanged",
        "b": "changed",
        "new_name": "renamed",
        "moved_too": "renamed",
        "fresh": "new",
        "gone": "deleted",
    }
    assert c.prompt("new_name").renamed_from == "old_name"
    assert c.prompt("moved_too").tokens[0].delta == 2  # compared with its old self
    assert c.verdict == "pass" and not c.failed


def test_growth_over_max_growth_fails_with_location():
    c = compare(results(prompt("rag", [case(1000)])), results(prompt("rag", [case(1101)], line=7)))
    t = c.prompts[0].tokens[0]
    assert (t.delta, t.percent, t.growth_allowed, t.growth_ok, t.tier) == (101, 10.1, 100.0, False, "red")
    assert c.verdict == "fail-budget" and c.budget_failed and c.failed
    (f,) = c.failures
    assert (f.kind, f.file, f.line, f.config_line) == ("growth", "prompts/rag.j2", 1, 7)
    assert "max_growth 10%" in f.message


def test_growth_exactly_at_limit_passes_and_tokens_growth_is_absolute():
    assert not compare(results(prompt("r", [case(1000)])), results(prompt("r", [case(1100)]))).failed
    c = compare(
        results(prompt("r", [case(1000, growth="50")])), results(prompt("r", [case(1051, growth="50")]))
    )
    assert c.budget_failed and c.prompts[0].tokens[0].growth_allowed == 50


def test_absolute_budget_fails_without_base():
    c = compare(None, results(prompt("r", [case(7600)])))  # 7600 + 500 reserve > 8000
    assert c.verdict == "fail-budget" and c.failures[0].kind == "budget"
    assert c.prompts[0].status == "new" and c.prompts[0].tokens[0].headroom == -100


@pytest.mark.parametrize(("tokens", "tier"), [(1020, "green"), (1060, "yellow"), (1200, "red")])
def test_tiers(tokens, tier):
    c = compare(results(prompt("r", [case(1000)])), results(prompt("r", [case(tokens)])))
    assert c.prompts[0].tokens[0].tier == tier


def test_little_headroom_is_yellow():
    c = compare(None, results(prompt("r", [case(7000, max_input=8000, reserve=500)])))  # 500 < 10% of 8000
    assert c.prompts[0].tokens[0].tier == "yellow" and not c.failed


def test_significant_middle_drop_regresses():
    base = results(prompt("r", [case(100)], rec=recall(grid(FULL))))
    head = results(prompt("r", [case(100)], rec=recall(grid({0.0: (5, 5), 0.5: (0, 5), 1.0: (5, 5)}))))
    c = compare(base, head)
    rc = c.prompts[0].recall
    assert rc.status == "fail" and c.verdict == "fail-recall" and c.recall_regressed
    mids = [x for x in rc.cells if x.depth == 0.5]
    assert all(x.verdict == "regressed" and x.p_value < 0.01 for x in mids)
    assert {f.kind for f in c.failures} == {"recall-regression"}
    assert "Fisher" in c.failures[0].message


def test_small_drop_is_noise_not_regression():
    base = results(prompt("r", [], rec=recall(grid({0.5: (5, 5)}))))
    head = results(prompt("r", [], rec=recall(grid({0.5: (3, 5)}))))
    c = compare(base, head)
    assert all(x.verdict == "ok" for x in c.prompts[0].recall.cells)  # p = 0.22: could be noise
    assert c.verdict == "pass"


def test_significant_but_tiny_drop_is_not_a_regression():
    base = results(prompt("r", [], rec=recall(grid({0.5: (200, 200)}), min_drop=0.2)))
    head = results(prompt("r", [], rec=recall(grid({0.5: (180, 200)}), min_drop=0.2)))
    cells = compare(base, head).prompts[0].recall.cells
    assert all(x.p_value < 0.05 and x.verdict == "ok" for x in cells)


def test_too_few_trials_is_inconclusive():
    base = results(prompt("r", [], rec=recall(grid({0.5: (2, 2)}))))
    head = results(prompt("r", [], rec=recall(grid({0.5: (0, 2)}))))
    c = compare(base, head)
    assert {x.verdict for x in c.prompts[0].recall.cells} == {"inconclusive"}
    assert c.verdict == "inconclusive" and not c.failed


def test_big_drop_cut_short_by_early_stopping_is_inconclusive_not_ok():
    # base passed after 8 straight hits, head failed after 3 misses in 6: p = 0.055, more trials could tell
    base = results(prompt("r", [], rec=recall(grid({0.5: (8, 8)}), planned=10)))
    head = results(prompt("r", [], rec=recall(grid({0.5: (3, 6)}), planned=10)))
    cells = compare(base, head).prompts[0].recall.cells
    assert all(x.p_value > 0.05 and x.verdict == "inconclusive" for x in cells)
    # the same counts with every planned trial run are just noise
    full = compare(
        results(prompt("r", [], rec=recall(grid({0.5: (8, 8)})))),
        results(prompt("r", [], rec=recall(grid({0.5: (3, 6)})))),
    )
    assert {x.verdict for x in full.prompts[0].recall.cells} == {"ok"}


def test_new_cell_below_threshold_is_reported():
    c = compare(None, results(prompt("r", [], rec=recall(grid({0.0: (5, 5), 0.5: (1, 5)})))))
    verdicts = {(x.depth, x.verdict) for x in c.prompts[0].recall.cells}
    assert (0.5, "below-threshold") in verdicts and (0.0, "new") in verdicts
    assert c.recall_regressed and c.failures[0].kind == "recall-threshold"


def test_other_model_on_base_is_not_compared():
    base = results(prompt("r", [], rec=recall(grid(FULL), model="claude-opus-5-5")))
    head = results(prompt("r", [], rec=recall(grid({0.0: (5, 5), 0.5: (4, 5), 1.0: (5, 5)}))))
    rc = compare(base, head).prompts[0].recall
    assert not rc.comparable and all(x.p_value is None for x in rc.cells)


def test_skipped_recall_and_outage_flag():
    head = results(
        prompt(
            "r",
            [case(10)],
            skipped="provider unavailable: 529 overloaded after 6 retries",
            skip_kind=SkipKind.PROVIDER_UNAVAILABLE,
        )
    )
    c = compare(None, head)
    assert c.prompts[0].recall.status == "skipped" and c.provider_outage and not c.failed
    assert c.verdict == "inconclusive"
    nokey = compare(None, results(prompt("r", [case(10)], skipped="ANTHROPIC_API_KEY is not set")))
    assert not nokey.provider_outage and nokey.verdict == "pass"


def test_policy_flags_are_separate():
    c = compare(results(prompt("r", [case(1000)])), results(prompt("r", [case(2000)])))
    assert c.failed_under(fail_on_budget=True, fail_on_recall_regression=False)
    assert not c.failed_under(fail_on_budget=False, fail_on_recall_regression=True)


def test_json_round_trip():
    c = compare(None, results(prompt("r", [case(10)])))
    data = json.loads(c.model_dump_json())
    assert data["verdict"] == "pass" and data["prompts"][0]["tokens"][0]["head_tokens"] == 10


def test_a_results_file_claiming_more_hits_than_trials_is_a_config_error(tmp_path):
    # hand-edited or corrupt: used to reach the Fisher test and end in a ValueError traceback
    from needle_action.errors import ConfigError
    from needle_action.results import load_results

    path = tmp_path / "head.json"
    results(prompt("a", [case(100)], rec=recall(grid({0.5: (5, 5)})))).dump(path)
    data = json.loads(path.read_text())
    data["prompts"][0]["recall"]["cells"][0]["hits"] = data["prompts"][0]["recall"]["cells"][0]["trials"] + 4
    path.write_text(json.dumps(data))
    with pytest.raises(ConfigError, match=r"recall\.cells\.0.*hits must be between 0 and trials"):
        load_results(path)
