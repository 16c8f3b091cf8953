"""The power a comparison states: its own design replayed on simulated pull requests (issue 31)."""

from __future__ import annotations

import random

import pytest

from needle_action.stats import runs, simulate
from needle_action.stats.groups import cell_key, planning_group
from needle_action.stats.runs import RunSpread
from needle_action.stats.sequential import Design, PromptData, final_groups, replay

SIZES, DEPTHS = [2000, 8000, 16000], [0.0, 0.25, 0.5, 0.75, 1.0]  # the benchmark grid
KEYS = [cell_key(s, d) for s in SIZES for d in DEPTHS]
MIDDLE = set(planning_group(SIZES, DEPTHS).cells)


def _answers(rng: random.Random, rate, trials: int = 20):
    """Answers of every cell, RATE(key) a trial."""
    return {k: [(t, rng.random() < rate(k)) for t in range(trials)] for k in KEYS}


def _data(base, *, planned: int = 20, spread: RunSpread | None = None, history=(), paired=True) -> PromptData:
    return PromptData(
        name="p",
        grids={"codeword": (base, {})},
        sizes=SIZES,
        depths=DEPTHS,
        planned=planned,
        floor=0.1,
        paired=paired and spread is None,
        base_planned=20,
        design=Design(),
        spread=spread,
        history={"codeword": list(history)} if history else {},
    )


def _flat(rate: float, seed: int = 0):
    return _answers(random.Random(seed), lambda _: rate)


def test_power_grows_with_the_drop_and_no_drop_is_the_false_alarm_rate():
    data = _data(_flat(0.8), planned=30)
    none = simulate.simulated_power(data, 0.01, 0.0)
    small = simulate.simulated_power(data, 0.01, 0.1)
    large = simulate.simulated_power(data, 0.01, 0.3)
    assert none is not None
    assert small is not None
    assert large is not None
    assert none.power <= 0.03  # the design's false-block rate is at most alpha (1%), give or take noise
    assert none.power < small.power < large.power
    assert large.power > 0.9
    assert large.reps == simulate.REPS
    assert 0 < large.stderr < 0.02


def test_the_figure_is_deterministic_and_reads_no_head_answer():
    base = _flat(0.9)
    first = simulate.simulated_power(_data(base), 0.01, 0.2)
    again = _data(base)
    again.grids = {"codeword": (base, _flat(0.1, seed=3))}  # a head's answers: not read
    assert simulate.simulated_power(again, 0.01, 0.2) == first


def test_a_base_nearer_perfect_recall_is_easier_to_watch():
    """The same 20 points are caught more often from .95 than from .6 (a count near 1 varies less)."""
    high = simulate.simulated_power(_data(_flat(0.95)), 0.01, 0.2)
    low = simulate.simulated_power(_data(_flat(0.6)), 0.01, 0.2)
    assert high is not None
    assert low is not None
    assert high.power > low.power + 0.05


def test_nothing_to_draw_from_states_nothing():
    assert simulate.simulated_power(_data({}), 0.01, 0.2) is None
    assert simulate.simulated_power(_data(_flat(0.9), planned=0), 0.01, 0.2) is None


def test_a_large_design_replays_fewer_times_and_one_too_large_is_not_simulated(monkeypatch):
    data = _data(_flat(0.9), planned=400)
    monkeypatch.setattr(simulate, "WORK", 150 * simulate._work(data))  # 150 replays of this design
    figure = simulate.simulated_power(data, 0.01, 0.2)
    assert figure is not None
    assert figure.reps == 150
    larger = _data(_flat(0.9), planned=399)
    monkeypatch.setattr(simulate, "WORK", (simulate.MIN_REPS - 1) * simulate._work(larger))
    assert simulate.simulated_power(larger, 0.01, 0.2) is None


def test_cell_logits_put_stored_runs_at_their_own_level():
    """A stored run answering worse everywhere does not pull the base's cells down as summed trials
    would: the fit gives it its own level and draws new runs around the runs' mean."""
    base = {k: (16, 20) for k in KEYS}
    worse = {k: (8, 20) for k in KEYS}
    alone = simulate.cell_logits(base, [])
    fitted = simulate.cell_logits(base, [worse, base, base])
    assert all(fitted[k] < alone[k] for k in KEYS)  # the runs' mean level is lower than the base's
    spread_between = max(fitted.values()) - min(fitted.values())
    assert spread_between < 1e-6  # a flat grid stays flat


def test_a_cell_is_read_at_its_measured_rate_not_pulled_toward_a_half():
    """19 of 20 is .95 (the empirical logit's (h + .5) / (n + 1) reads .93, and near 1 that is 40%
    more information); 20 of 20 stays half a trial from certain."""
    k = KEYS[0]
    rate = {h: simulate._expit(simulate.cell_logits({k: (h, 20)}, [])[k]) for h in (19, 20, 0)}
    assert rate[19] == pytest.approx(0.95)
    assert rate[20] == pytest.approx(0.975)
    assert rate[0] == pytest.approx(0.025)


def test_remeasuring_a_model_moves_its_rates_by_their_noise_only():
    style = simulate._style({k: (16, 20) for k in KEYS}, [])
    again = style.remeasured(random.Random(1), 0.0)
    assert [k for k, _ in again.logits] == [k for k, _ in style.logits]
    assert again.base_trials == style.base_trials
    moved = [abs(a - b) for (_, a), (_, b) in zip(again.logits, style.logits, strict=True)]
    assert 0 < max(moved) < 3.0  # 20 trials a cell: a few tenths of a logit, never a new grid
    assert again == style.remeasured(random.Random(1), 0.0)  # seeded: the same every time


def test_across_runs_without_an_estimate_the_whole_grid_is_judged_against_the_widest_spread():
    prior = RunSpread.prior()
    estimated = RunSpread(tau=0.3, runs=4, method="moments")
    assert any(g.kind == "all" for g in final_groups(_data(_flat(0.8), spread=prior)))
    assert prior.tested_variance == pytest.approx(runs.UNMEASURED_TAU**2)  # not the planning prior's
    assert estimated.tested_variance == pytest.approx(0.09)
    assert "judged against 0.60" in prior.describe()


def test_a_whole_grid_that_drops_is_caught_across_runs_and_a_run_level_is_not():
    """Every cell 60 points down in the head: the contrast sees nothing (a run's level looks the
    same); the whole-grid test sees it, on an estimate or on the widest spread. A head run 0.5 lower
    on the logit scale everywhere (a run's level, not a regression) passes on the prior."""
    rng = random.Random(5)
    base = _answers(rng, lambda _: 0.9, 40)
    history = [{k: (36, 40) for k in KEYS}] * 8
    heads = {"broad drop": _answers(rng, lambda _: 0.3, 40), "a lower run": _answers(rng, lambda _: 0.85, 40)}
    decisions = {}
    for what, head in heads.items():
        for name, spread in {"prior": RunSpread.prior(), "estimated": RunSpread(0.2, 8, "moments")}.items():
            data = _data(base, planned=40, spread=spread, history=history if name == "estimated" else ())
            data.grids = {"codeword": (base, head)}
            decisions[what, name] = replay([data], 0.01)["p"].status
    assert decisions["broad drop", "prior"] == decisions["broad drop", "estimated"] == "fail"
    assert decisions["a lower run", "prior"] == "pass"


@pytest.mark.slow
@pytest.mark.parametrize("rate", [0.8, 0.95])
def test_the_stated_figure_matches_fresh_pull_requests(rate):
    """What the comparison states from one measured base, averaged over 24 bases, against 600 pull
    requests drawn afresh (base and head) at the true rate with 20 points off the middle: within 6
    points (both are estimates: about 2.3 points of standard error together)."""
    rng = random.Random(11)
    stated = [simulate.simulated_power(_data(_flat(rate, seed=i)), 0.01, 0.2) for i in range(24)]
    mean_stated = sum(s.power for s in stated if s is not None) / len(stated)
    blocked = 0
    for _ in range(600):
        base = _answers(rng, lambda _: rate)
        head = _answers(rng, lambda k: rate - (0.2 if k in MIDDLE else 0.0))
        data = _data(base)
        data.grids = {"codeword": (base, head)}
        blocked += replay([data], 0.01)["p"].status == "fail"
    assert abs(mean_stated - blocked / 600) <= 0.06


def test_each_base_draws_its_own_replays_and_a_prompts_name_changes_nothing():
    """The replays' seed is a digest of the question: two bases measured apart draw other numbers
    (one seed for all made the replays' noise a shared bias across pull requests), while the same
    base under another prompt name restates the same figure."""
    one, other = _data(_flat(0.8, seed=1)), _data(_flat(0.8, seed=2))
    q_one, q_other = simulate.question_of(one, 0.01, 0.2), simulate.question_of(other, 0.01, 0.2)
    assert q_one is not None
    assert q_other is not None
    assert simulate.question_seed(q_one) != simulate.question_seed(q_other)
    renamed = _data(_flat(0.8, seed=1))
    renamed.name = "another prompt"
    q_renamed = simulate.question_of(renamed, 0.01, 0.2)
    assert q_renamed is not None
    assert simulate.question_seed(q_renamed) == simulate.question_seed(q_one)
    assert simulate.simulated_power(renamed, 0.01, 0.2) == simulate.simulated_power(one, 0.01, 0.2)
