"""The group-sequential comparison (stats/sequential.py): looks, alpha spending, the paired test,
the pass rule, and the fixed design it falls back to with both stop rules off."""

from __future__ import annotations

import random

import pytest

from needle_action.compare.recall import test_styled_groups as fixed_groups
from needle_action.stats.exact import paired_drop_pvalue
from needle_action.stats.groups import cell_key
from needle_action.stats.sequential import FIXED, Design, PromptData, drop_upper, evaluate_look, replay

SIZES, DEPTHS = [2000, 8000, 16000], [0.0, 0.25, 0.5, 0.75, 1.0]
CELLS = [cell_key(s, d) for s in SIZES for d in DEPTHS]


def test_looks_and_spends_add_up_to_alpha():
    d = Design()
    assert d.looks(20) == (6, 12, 20)
    assert sum(d.levels(20, 0.01)) == pytest.approx(0.01)
    assert d.levels(20, 0.01)[-1] == pytest.approx(0.0088)
    assert d.looks(2) == (1, 2)
    assert sum(d.levels(2, 0.01)) == pytest.approx(0.01)
    assert FIXED.looks(20) == (20,)
    assert FIXED.levels(20, 0.01) == (0.01,)
    assert Design(block=False).levels(20, 0.01) == (0.0, 0.0, 0.01)  # passing spends nothing


def test_paired_test_is_an_exact_sign_test_on_discordant_pairs():
    assert paired_drop_pvalue(5, 0) == pytest.approx(1 / 32)
    assert paired_drop_pvalue(0, 4) == 1.0
    assert paired_drop_pvalue(0, 0) == 1.0
    assert paired_drop_pvalue(9, 1) == pytest.approx(11 / 1024)
    with pytest.raises(ValueError, match="pair counts must be >= 0"):
        paired_drop_pvalue(-1, 2)


def test_drop_upper_bound_covers_the_observed_drop():
    upper = drop_upper((90, 100), (80, 100))
    assert upper is not None
    assert 0.1 < upper < 0.3
    assert drop_upper((0, 0), (1, 2)) is None


def _data(
    rng: random.Random, base_p, head_p, design: Design, paired=False, trials=20, name="p"
) -> PromptData:
    def side(p):
        return {k: [(i, rng.random() < p(k)) for i in range(trials)] for k in CELLS}

    return PromptData(
        name, {"": (side(base_p), side(head_p))}, SIZES, DEPTHS, trials, 0.1, paired, trials, design
    )


def test_both_rules_off_is_the_fixed_design_verdict_for_verdict():
    rng = random.Random(5)
    for i in range(40):
        drop = 0.3 if i % 3 == 0 else 0.0
        data = _data(rng, lambda k: 0.9, lambda k, d=drop: 0.9 - (d if 0 < k[1] < 1 else 0), FIXED)
        decision = replay([data], 0.01)["p"]
        counts = {
            s: (
                {k: (sum(h for _, h in v), len(v)) for k, v in b.items()},
                {k: (sum(h for _, h in v), len(v)) for k, v in h.items()},
            )
            for s, (b, h) in data.grids.items()
        }
        fixed = fixed_groups(counts, SIZES, DEPTHS, alpha=0.01, floor=0.1)
        assert decision.look == 1
        assert decision.trials == 20
        assert [g.regressed for g in decision.groups] == [t.regressed for t in fixed]
        assert [g.p_value for g in decision.groups] == [t.p_value for t in fixed]


def test_a_clear_drop_blocks_at_an_early_look_and_no_change_passes_early():
    rng = random.Random(1)
    drop = _data(rng, lambda k: 0.95, lambda k: 0.95 - (0.5 if 0 < k[1] < 1 else 0), Design())
    d = replay([drop], 0.01)["p"]
    assert d.status == "fail"
    assert d.look < 3
    assert d.trials < 20
    same = _data(rng, lambda k: 0.97, lambda k: 0.97, Design())
    d = replay([same], 0.01)["p"]
    assert d.status == "pass"
    assert d.look < 3


def test_the_family_spans_every_prompt_of_the_pull_request():
    rng = random.Random(2)
    datas = [_data(rng, lambda k: 0.9, lambda k: 0.9, Design(), name=f"p{i}") for i in range(4)]
    decisions = evaluate_look(datas, 3, 0.01)
    bounds = [g.level for d in decisions.values() for g in d.groups if g.level is not None]
    # Holm over 4 prompts x 9 groups: the strictest bound is the final spend over 36
    assert all(b >= 0.0088 / 36 - 1e-12 for b in bounds)
    assert len({d.look for d in decisions.values()}) == 1


def test_a_run_stopped_at_a_look_is_decided_there():
    rng = random.Random(3)
    data = _data(rng, lambda k: 0.5, lambda k: 0.5, Design())
    d = replay([data], 0.01, ends={"p": 12})["p"]
    assert d.stopped
    assert d.trials <= 12
    assert d.status in ("pass", "fail")


def test_early_looks_test_the_middle_only_and_decided_prompts_stay_in_the_family():
    rng = random.Random(4)
    drop = _data(rng, lambda k: 0.95, lambda k: 0.95 - (0.4 if 0 < k[1] < 1 else 0), Design())
    first = evaluate_look([drop], 0, 0.01)["p"]
    tested = [g for g in first.groups if g.p_value is not None]
    assert [g.group.kind for g in tested] == ["middle"]  # one test: Holm's bound is the whole spend
    assert tested[0].level == pytest.approx(0.0004)
    others = [_data(rng, lambda k: 0.9, lambda k: 0.9, Design(), name=f"q{i}") for i in range(3)]
    widened = evaluate_look([drop], 0, 0.01, decided=others)["p"]
    middle = next(g for g in widened.groups if g.p_value is not None)
    assert middle.level == pytest.approx(0.0004 / 4)  # the decided prompts' middles count as p = 1
    final = evaluate_look([drop], 2, 0.01)["p"]
    assert sum(g.p_value is not None for g in final.groups) > 1  # the last look tests every group


def test_the_pass_rule_reads_the_chance_that_the_last_look_flags_the_group():
    rng = random.Random(6)
    same = _data(rng, lambda k: 0.9, lambda k: 0.9, Design())
    groups = evaluate_look([same], 0, 0.01)["p"].groups
    assert all(g.conditional is not None and g.conditional < 0.01 for g in groups)
    assert all(g.futile() for g in groups)
    drop = _data(rng, lambda k: 0.9, lambda k: 0.9 - (0.3 if 0 < k[1] < 1 else 0), Design())
    middle = next(g for g in evaluate_look([drop], 0, 0.01)["p"].groups if g.group.kind == "middle")
    assert middle.conditional is not None
    assert middle.conditional > 0.5
    assert not middle.futile()
