"""Noise alone must not block a pull request.

Same prompt, same simulated model, only the seed differs between "base" and "head" (fresh
needles, so fresh draws): compare() must flag a recall regression in at most about alpha of the
pairs. Early stopping is off here so every cell runs all its trials: that gives the test its most
power, the hardest case for false alarms. The rate is printed (run with -s to see it).
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import pytest

from needle_action.compare import compare
from tests.fakes.anthropic_server import FakeAnthropic
from tests.fakes.simulated_model import SimulatedModel, flat, u_shape
from tests.integration.recall_helpers import run, write_project

PAIRS = 40
ALPHA = 0.05


@pytest.fixture
def fake_env(monkeypatch):
    def start(curve):
        fake = FakeAnthropic(SimulatedModel(curve, seed=11)).start()
        monkeypatch.setenv("ANTHROPIC_BASE_URL", fake.base_url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", fake.api_key)
        return fake

    fakes = []
    yield lambda curve: fakes.append(start(curve)) or fakes[-1]
    for f in fakes:
        f.stop()


def _project(root):
    """One prompt, one size, three depths, 10 trials a cell, every trial run (no early stopping)."""
    return write_project(
        root,
        sizes=(400,),
        depths=(0.0, 0.5, 1.0),
        trials=10,
        recall_extra=f"early_stop = false\nalpha = {ALPHA}\nmin_drop = 0.2",
    )


def _runs(config, seeds):
    with ThreadPoolExecutor(max_workers=4) as pool:
        return list(pool.map(lambda s: run(config, seed=s), seeds))


@pytest.mark.slow
def test_noise_alone_is_not_flagged(tmp_path, fake_env):
    # a curve with middling rates (most variance per trial) and a drop in the middle, so cells differ
    fake = fake_env(u_shape(edge=0.9, middle=0.6, margin=0.05))
    config = _project(tmp_path)
    results = _runs(config, range(PAIRS + 1))  # pair i = (seed i, seed i + 1)
    assert all(r.prompts[0].recall is not None and not r.prompts[0].recall.partial for r in results)
    flagged_pairs = cells = flagged_cells = big_drops = 0
    for base, head in zip(results, results[1:], strict=False):
        c = compare(base, head)
        rc = c.prompts[0].recall
        assert rc.comparable and all(x.p_value is not None for x in rc.cells)
        flagged_pairs += c.recall_regressed
        cells += len(rc.cells)
        flagged_cells += sum(x.verdict == "regressed" for x in rc.cells)
        big_drops += sum(
            x.drop >= 0.2 for x in rc.cells
        )  # what a rule without a significance test would flag
    pair_rate, cell_rate = flagged_pairs / PAIRS, flagged_cells / cells
    print(
        f"\nnoise only: {flagged_pairs}/{PAIRS} seed pairs flagged ({pair_rate:.1%}), "
        f"{flagged_cells}/{cells} cells ({cell_rate:.1%}); alpha={ALPHA}; "
        f"{big_drops} cells dropped by >= min_drop by chance; "
        f"{fake.calls['messages']} model calls"
    )
    assert big_drops > 0  # the noise is real: a drop-only rule would have blocked pull requests
    assert cell_rate <= ALPHA
    assert (
        pair_rate <= 2 * ALPHA
    )  # three cells per pair: family-wise at most ~3 alpha, Fisher is conservative


def test_a_real_drop_is_flagged_at_the_same_settings(tmp_path, fake_env):
    """The power side of the same test: a middle that really collapses is caught."""
    config = _project(tmp_path)
    fake_env(flat(0.9))
    base = run(config, seed=1)
    fake_env(u_shape(edge=0.9, middle=0.1, margin=0.05))  # a second fake: the head's "model" loses the middle
    head = run(config, seed=2)
    c = compare(base, head)
    verdicts = {x.depth: x.verdict for x in c.prompts[0].recall.cells}
    assert verdicts[0.5] == "regressed" and c.recall_regressed
    assert os.environ["ANTHROPIC_BASE_URL"]
