"""Acceptance for the recall engine against the fake Anthropic Messages API (real HTTP, real SDK via
ANTHROPIC_BASE_URL, a dummy key) answering with the simulated model (tests/fakes/simulated_model.py):

* a U-shaped curve is diagnosed lost-in-the-middle, a flat high curve all-pass, a cliff at a size
  size-limited with the right effective length, each over at least 50 seeds (rates printed);
* with 30% injected faults (429, 529, 500, dropped connections, malformed bodies) the verdicts and
  every answer equal the fault-free run with the same seed, and no cell is lost;
* caps give labelled partial results; the cache makes a rerun cost 0 calls.

``NEEDLE_ACCEPTANCE_SEEDS`` raises the number of seeds (default 50, the floor).
"""

from __future__ import annotations

import os

import pytest

from needle_action.results.cache import ResultCache
from tests.fakes.anthropic_server import FakeAnthropic
from tests.fakes.simulated_model import SimulatedModel, cliff, flat, u_shape
from tests.integration.recall_helpers import outcomes, recall_of, run, verdicts, write_project

SEEDS = max(50, int(os.environ.get("NEEDLE_ACCEPTANCE_SEEDS", "50")))
FLOOR = 0.9

U_SHAPE = u_shape(edge=0.97, middle=0.1, margin=0.08)
FLAT_HIGH = flat(0.99)
CLIFF = cliff(at_size=1000, before=0.99, after=0.05)


@pytest.fixture(scope="module")
def fake():
    with FakeAnthropic() as server, pytest.MonkeyPatch.context() as mp:
        mp.setenv("ANTHROPIC_BASE_URL", server.base_url)
        mp.setenv("ANTHROPIC_API_KEY", server.api_key)
        yield server


def rate_over_seeds(fake, tmp_path, curve, accept, **project) -> tuple[float, dict[str, int]]:
    """Fraction of SEEDS prompts (each with its own recall seed: fresh needles and fresh draws of
    the simulated model) whose result ACCEPTs. All seeds run in one engine call, one client."""
    fake.responder = SimulatedModel(curve, seed=10_000)
    config = write_project(tmp_path, seeds=list(range(SEEDS)), **project)
    results = run(config, only=[f"qa{s}" for s in range(SEEDS)])
    kinds: dict[str, int] = {}
    good = 0
    for s in range(SEEDS):
        recall = recall_of(results, f"qa{s}")
        assert recall.seed == s
        kinds[recall.diagnosis.kind] = kinds.get(recall.diagnosis.kind, 0) + 1
        good += bool(accept(recall))
    return good / SEEDS, kinds


@pytest.mark.slow  # SEEDS (>= 50) engine runs each
@pytest.mark.parametrize(
    ("name", "curve", "kind", "sizes", "depths"),
    [
        ("U-shape", U_SHAPE, "lost-in-the-middle", (400, 800), (0.0, 0.25, 0.5, 1.0)),
        ("flat 0.99", FLAT_HIGH, "all-pass", (400, 1200), (0.0, 0.5, 1.0)),
    ],
    ids=["u-shape-is-lost-in-the-middle", "flat-high-is-all-pass"],
)
def test_a_curve_is_diagnosed_as_its_kind(tmp_path, fake, name, curve, kind, sizes, depths):
    def accept(r):
        return r.diagnosis.kind == kind

    rate, kinds = rate_over_seeds(fake, tmp_path, curve, accept, sizes=sizes, depths=depths)
    print(f"\n{name} -> {kind} in {rate:.0%} of {SEEDS} seeds; all diagnoses: {kinds}")
    assert rate >= FLOOR


@pytest.mark.slow  # SEEDS (>= 50) engine runs
def test_cliff_is_size_limited_with_the_right_effective_length(tmp_path, fake):
    def accept(r):
        return (
            r.diagnosis.kind == "size-limited"
            and r.effective_context == 800
            and "800 tokens" in r.diagnosis.summary
        )

    rate, kinds = rate_over_seeds(
        fake, tmp_path, CLIFF, accept, sizes=(400, 800, 1200), depths=(0.0, 0.5, 1.0)
    )
    print(f"\ncliff at 1000 tokens -> size-limited, effective 800, in {rate:.0%} of {SEEDS} seeds; {kinds}")
    assert rate >= FLOOR


@pytest.mark.slow  # four engine runs, two of them waiting out injected timeouts
@pytest.mark.parametrize("seed", [0, 1])
def test_faults_change_no_verdict_and_lose_no_cell(tmp_path, seed, monkeypatch):
    config = write_project(tmp_path)
    runs = {}
    for rate in (0.0, 0.3):
        faults = {"rate": rate, "hold_s": 0.2, "retry_after_s": 0.01}
        with FakeAnthropic(SimulatedModel(U_SHAPE, seed=seed), faults=faults, seed=seed) as server:
            server.point_env(monkeypatch)
            runs[rate] = run(config, seed=seed)
            injected = server.calls["faults"]
        if rate:
            assert injected > 0
            print(f"\nseed {seed}: {injected} faults injected over {runs[rate].totals.calls} calls")
    clean, faulty = runs[0.0].prompt("qa").recall, runs[0.3].prompt("qa").recall
    assert not faulty.partial
    assert faulty.partial_reason is None
    assert verdicts(runs[0.3]) == verdicts(runs[0.0])
    assert outcomes(runs[0.3]) == outcomes(runs[0.0])
    assert len(faulty.cells) == 3 * 5
    assert all(c.trials > 0 for c in faulty.cells)
    assert faulty.calls == clean.calls
    assert faulty.diagnosis == clean.diagnosis


def test_caps_give_labelled_partial_results(tmp_path, fake):
    fake.responder = SimulatedModel(FLAT_HIGH, seed=1)
    calls = run(write_project(tmp_path / "calls", recall_extra="max_calls = 10")).prompt("qa").recall
    assert calls.partial
    assert calls.partial_reason == "max_calls (10) reached"
    assert calls.calls == 10
    cost = run(write_project(tmp_path / "cost", recall_extra="max_cost_usd = 0.01")).prompt("qa").recall
    assert cost.partial
    assert cost.partial_reason == "max_cost_usd ($0.01) reached"
    assert cost.cost_usd <= 0.01
    for r in (calls, cost):
        assert r.diagnosis.kind == "inconclusive"
        assert any(c.status == "undecided" for c in r.cells)


def test_cache_gives_zero_calls_on_rerun(tmp_path, fake):
    fake.responder = SimulatedModel(U_SHAPE, seed=2)
    config = write_project(tmp_path / "p")
    store = ResultCache(tmp_path / "cache.sqlite")
    first = run(config, cache=store)
    before = len(fake.requests)
    again = run(config, cache=store)
    assert len(fake.requests) == before
    assert again.totals.calls == 0
    assert again.totals.cached_calls == first.totals.calls > 0
    assert verdicts(again) == verdicts(first)
