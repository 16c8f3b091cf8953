"""compare(): prompt statuses, token verdicts and tiers, recall significance per cell, headline."""

from __future__ import annotations

import json

import pytest

from needle_action.compare import compare
from needle_action.pipeline.policy import comparison_exit_code as exit_of
from needle_action.results import SkipKind
from tests.unit._results_builder import case, grid, prompt, recall, results

FULL = {0.0: (5, 5), 0.5: (5, 5), 1.0: (5, 5)}
FULL20 = {0.0: (20, 20), 0.5: (19, 20), 1.0: (20, 20)}


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
    assert c.verdict == "pass"
    assert not c.failed


def test_growth_over_max_growth_fails_with_location():
    c = compare(results(prompt("rag", [case(1000)])), results(prompt("rag", [case(1101)], line=7)))
    t = c.prompts[0].tokens[0]
    assert (t.delta, t.percent, t.growth_allowed, t.growth_ok, t.tier) == (101, 10.1, 100.0, False, "red")
    assert c.verdict == "fail-budget"
    assert c.budget_failed
    assert c.failed
    (f,) = c.failures
    assert (f.kind, f.file, f.line, f.config_line) == ("growth", "prompts/rag.j2", 1, 7)
    assert "max_growth 10%" in f.message


def test_growth_exactly_at_limit_passes_and_tokens_growth_is_absolute():
    assert not compare(results(prompt("r", [case(1000)])), results(prompt("r", [case(1100)]))).failed
    c = compare(
        results(prompt("r", [case(1000, growth="50")])), results(prompt("r", [case(1051, growth="50")]))
    )
    assert c.budget_failed
    assert c.prompts[0].tokens[0].growth_allowed == 50


def test_absolute_budget_fails_without_base():
    c = compare(None, results(prompt("r", [case(7600)])))  # 7600 + 500 reserve > 8000
    assert c.verdict == "fail-budget"
    assert c.failures[0].kind == "budget"
    assert c.prompts[0].status == "new"
    assert c.prompts[0].tokens[0].headroom == -100


@pytest.mark.parametrize(("tokens", "tier"), [(1020, "green"), (1060, "yellow"), (1200, "red")])
def test_tiers(tokens, tier):
    c = compare(results(prompt("r", [case(1000)])), results(prompt("r", [case(tokens)])))
    assert c.prompts[0].tokens[0].tier == tier


def test_little_headroom_is_yellow():
    c = compare(None, results(prompt("r", [case(7000, max_input=8000, reserve=500)])))  # 500 < 10% of 8000
    assert c.prompts[0].tokens[0].tier == "yellow"
    assert not c.failed


def test_a_collapsed_middle_regresses_as_a_group():
    base = results(prompt("r", [case(100)], rec=recall(grid(FULL20))))
    head = results(prompt("r", [case(100)], rec=recall(grid({0.0: (20, 20), 0.5: (4, 20), 1.0: (20, 20)}))))
    c = compare(base, head)
    rc = c.prompts[0].recall
    assert rc.status == "fail"
    assert c.verdict == "fail-recall"
    assert c.recall_regressed
    flagged = {g.label for g in rc.groups if g.verdict == "regressed"}
    assert "middle depth (50%)" in flagged
    assert all(x.verdict == "regressed" for x in rc.cells if x.depth == 0.5)
    assert all(x.verdict == "ok" for x in rc.cells if x.depth != 0.5)
    assert {f.kind for f in c.failures} == {"recall-regression"}
    assert "Holm" in c.failures[0].message
    assert "stratified" in c.failures[0].message
    assert exit_of(c) == 1


def test_a_drop_below_the_floor_is_never_tested():
    # 200 trials a side: 10 points would be significant, but half of min_drop (0.3) is the floor
    base = results(prompt("r", [], rec=recall(grid({0.5: (190, 200)}), min_drop=0.3)))
    head = results(prompt("r", [], rec=recall(grid({0.5: (170, 200)}), min_drop=0.3)))
    rc = compare(base, head).prompts[0].recall
    assert rc.floor == pytest.approx(0.15)
    assert {g.verdict for g in rc.groups} == {"below-floor"}
    assert all(g.p_value is None for g in rc.groups)
    assert rc.status == "pass"


def test_noise_at_full_counts_is_ok():
    base = results(prompt("r", [], rec=recall(grid({0.0: (19, 20), 0.5: (17, 20), 1.0: (19, 20)}))))
    head = results(prompt("r", [], rec=recall(grid({0.0: (18, 20), 0.5: (14, 20), 1.0: (19, 20)}))))
    c = compare(base, head)
    rc = c.prompts[0].recall
    assert rc.status == "pass"
    assert c.verdict == "pass"
    assert not c.failed
    assert all(g.verdict in ("ok", "below-floor") for g in rc.groups)
    assert rc.detectable_drop is not None
    assert rc.detectable_in == "middle depth (50%)"


def test_curtailed_counts_are_not_tested():
    # early stopping ended these cells: their counts depend on the answers, the test cannot use them
    base = results(prompt("r", [], rec=recall(grid({0.5: (8, 8)}), planned=20, stopped=True, full=False)))
    head = results(prompt("r", [], rec=recall(grid({0.5: (0, 6)}), planned=20, stopped=True, full=False)))
    c = compare(base, head)
    rc = c.prompts[0].recall
    assert {g.verdict for g in rc.groups} == {"untested"}
    assert {x.verdict for x in rc.cells} == {"inconclusive"}
    assert c.verdict == "inconclusive"
    assert not c.failed


def test_a_partial_head_is_underpowered_never_pass():
    base = results(prompt("r", [], rec=recall(grid(FULL20))))
    head = results(prompt("r", [], rec=recall(grid({0.0: (6, 6), 0.5: (5, 6), 1.0: (6, 6)}), partial=True)))
    c = compare(base, head)
    assert c.prompts[0].recall.status == "underpowered"
    assert c.verdict == "underpowered"
    assert c.recall_underpowered
    assert not c.failed
    assert "Underpowered" in c.headline


def test_a_regression_found_in_a_partial_run_still_fails():
    base = results(prompt("r", [], rec=recall(grid(FULL20))))
    head = results(
        prompt("r", [], rec=recall(grid({0.0: (10, 10), 0.5: (0, 10), 1.0: (10, 10)}), partial=True))
    )
    c = compare(base, head)
    assert c.verdict == "fail-recall"
    assert exit_of(c) == 1


def test_same_fingerprint_is_not_tested():
    same = recall(grid({0.5: (20, 20)}), pool_key="k")
    other = recall(grid({0.5: (10, 20)}), pool_key="k")
    rc = compare(results(prompt("r", [], rec=same)), results(prompt("r", [], rec=other))).prompts[0].recall
    assert rc.unchanged
    assert rc.groups == []
    assert rc.status == "pass"


def test_history_is_shown_but_kept_out_of_the_test():
    # a run is a cluster (its seed's needles and filler): pooling other seeds' runs as if their
    # trials were independent blocked up to 17% of unchanged PRs in simulation (docs/decisions.md)
    from needle_action.results import HistoryCell, RecallHistory

    base_rec = recall(grid({0.5: (18, 20)}))
    base_rec.history = RecallHistory(
        runs=3,
        seeds=[1, 2, 3],
        cells=[HistoryCell(size=s, depth=0.5, hits=54, trials=60) for s in (2000, 8000)],
    )
    head = results(prompt("r", [], rec=recall(grid({0.5: (12, 20)}))))
    rc = compare(results(prompt("r", [], rec=base_rec)), head).prompts[0].recall
    assert rc.base.history_trials == 120
    assert rc.base.history_runs == 3
    assert rc.base.trials == 40
    assert rc.head.trials == 40
    assert rc.head.history_trials == 0
    group = next(g for g in rc.groups if g.kind == "depth")
    assert (group.base_hits, group.base_trials) == (36, 40)
    assert (group.head_hits, group.head_trials) == (24, 40)
    assert rc.test == "unpaired"  # no answers stored: trials cannot be paired


def test_new_prompt_below_threshold_is_reported():
    rec = recall(grid({0.0: (20, 20), 0.5: (2, 20), 1.0: (20, 20)}), status="fail")
    c = compare(None, results(prompt("r", [], rec=rec)))
    verdicts = {(x.depth, x.verdict) for x in c.prompts[0].recall.cells}
    assert (0.5, "below-threshold") in verdicts
    assert (0.0, "new") in verdicts
    assert c.recall_regressed
    assert c.failures[0].kind == "recall-threshold"


def test_other_model_on_base_is_not_compared():
    base = results(prompt("r", [], rec=recall(grid(FULL), model="claude-opus-5-5")))
    head = results(prompt("r", [], rec=recall(grid({0.0: (5, 5), 0.5: (4, 5), 1.0: (5, 5)}))))
    rc = compare(base, head).prompts[0].recall
    assert not rc.comparable
    assert all(x.p_value is None for x in rc.cells)


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
    assert c.prompts[0].recall.status == "skipped"
    assert c.provider_outage
    assert not c.failed
    assert c.verdict == "inconclusive"
    nokey = compare(None, results(prompt("r", [case(10)], skipped="ANTHROPIC_API_KEY is not set")))
    assert not nokey.provider_outage
    assert nokey.verdict == "pass"


def test_policy_flags_are_separate():
    c = compare(results(prompt("r", [case(1000)])), results(prompt("r", [case(2000)])))
    assert c.failed_under(fail_on_budget=True, fail_on_recall_regression=False)
    assert not c.failed_under(fail_on_budget=False, fail_on_recall_regression=True)


def test_json_round_trip():
    c = compare(None, results(prompt("r", [case(10)])))
    data = json.loads(c.model_dump_json())
    assert data["verdict"] == "pass"
    assert data["prompts"][0]["tokens"][0]["head_tokens"] == 10


def test_a_results_file_claiming_more_hits_than_trials_is_a_config_error(tmp_path):
    # hand-edited or corrupt: used to reach the Fisher test and end in a ValueError traceback
    from needle_action.core.errors import ConfigError
    from needle_action.results import load_results

    path = tmp_path / "head.json"
    results(prompt("a", [case(100)], rec=recall(grid({0.5: (5, 5)})))).dump(path)
    data = json.loads(path.read_text())
    data["prompts"][0]["recall"]["cells"][0]["hits"] = data["prompts"][0]["recall"]["cells"][0]["trials"] + 4
    path.write_text(json.dumps(data))
    with pytest.raises(ConfigError, match=r"recall\.cells\.0.*hits must be between 0 and trials"):
        load_results(path)


def test_a_stored_run_claiming_more_hits_than_trials_is_refused_as_it_loads():
    # a stored run of a base from another run reaches the run-level fit (a logit): a corrupt count
    # must fail as the file loads (a ConfigError naming it), not as a math domain error there
    from pydantic import ValidationError

    from needle_action.results.recall import HistoryCell

    assert HistoryCell(size=600, depth=0.5, hits=3, trials=3).hits == 3
    with pytest.raises(ValidationError, match="hits must be between 0 and trials"):
        HistoryCell(size=600, depth=0.5, hits=20, trials=3)


def test_same_job_power_is_restated_at_the_base_measured_rates():
    from needle_action.report.render import render_comment

    def pair(rate20: int):
        base = results(prompt("r", [], rec=recall(grid({0.0: (20, 20), 0.5: (rate20, 20), 1.0: (20, 20)}))))
        head = results(
            prompt("r", [], rec=recall(grid({0.0: (19, 20), 0.5: (rate20 - 1, 20), 1.0: (20, 20)})))
        )
        return compare(base, head)

    low, high = pair(16), pair(19)  # middle measured at .8 and .95
    p_low, p_high = low.prompts[0].recall.power, high.prompts[0].recall.power
    assert p_low is not None
    assert p_high is not None
    assert p_low < p_high
    assert "at the base's measured rates" in render_comment(low)


def test_a_heads_record_across_runs_is_reused_only_against_its_own_base():
    # `needle report HEAD --base OTHER`: the spread and stored runs the head's run kept were made
    # against the base it was measured with; against another base they are recomputed from it
    from needle_action.compare.recall import run_levels
    from needle_action.stats.levels import cross_run

    base = prompt("a", [case(100)], rec=recall(grid({0.5: (18, 20)})))
    other = prompt("a", [case(100)], rec=recall(grid({0.5: (12, 20)})))
    head = prompt("a", [case(100)], rec=recall(grid({0.5: (17, 20)})))
    assert head.recall is not None
    assert base.recall is not None
    assert other.recall is not None
    style = head.recall.style_names()[0]
    kept = cross_run(base.recall, style).model_copy(update={"tau": 0.123})  # marked: the kept one
    head.recall.cross_run = kept
    assert run_levels(head, base, across=True) is kept
    against_other = run_levels(head, other, across=True)
    assert against_other is not None
    assert against_other.tau != 0.123
    assert against_other.base == cross_run(other.recall, style).base
    assert run_levels(head, base, across=False) is None  # one job: today's tests, no record


def test_a_comparison_across_runs_states_its_replayed_power_and_what_it_does_not_test():
    from needle_action.report.render import render_comment

    cells = {0.0: (19, 20), 0.25: (17, 20), 0.5: (16, 20), 0.75: (17, 20), 1.0: (19, 20)}
    base = results(prompt("r", [], rec=recall(grid(cells), pool_key="main")))
    head = results(prompt("r", [], rec=recall(grid(cells), pool_key="reworded")))
    base.run_id, head.run_id = "main-run", "pr-run"  # two jobs: the base is another run's
    rc = compare(base, head).prompts[0].recall
    assert rc is not None
    assert rc.test == "cross-run"
    assert rc.power is not None
    assert 0.0 <= rc.power < 1.0
    assert rc.power_replays is not None
    assert rc.power_replays >= 100
    comment = render_comment(compare(base, head))
    assert "each run at its own level" in comment
    assert "widest spread" in comment  # no stored runs: the whole grid judged against 0.6, said so
    assert any(g.kind == "all" for g in rc.groups)
