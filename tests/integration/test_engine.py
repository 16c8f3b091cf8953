"""The recall engine end to end against the fake Anthropic server (real HTTP, real SDK): early
stopping that keeps every verdict, scheduling that does not change outcomes, bounded concurrency,
caps, provider outages, the results cache and baseline reuse, settings hashing and "auto" sizes."""

from __future__ import annotations

import threading
import time

import pytest

from needle_action.config import load_config
from needle_action.pipeline.measure import RecallOverrides
from needle_action.recall.run import engine
from needle_action.results.cache import ResultCache
from needle_action.stats.cells import final_status
from tests.fakes.anthropic_server import FakeAnthropic, Faults
from tests.fakes.simulated_model import SimulatedModel, flat, u_shape
from tests.integration.recall_helpers import outcomes, run, verdicts, write_project

U = u_shape(edge=0.97, middle=0.1, margin=0.08)


@pytest.fixture
def fake(monkeypatch):
    with FakeAnthropic(SimulatedModel(U, seed=11)) as server:
        yield server.point_env(monkeypatch)


def model_calls(server: FakeAnthropic) -> int:
    return sum(1 for r in server.requests if r["path"].endswith("/v1/messages"))


def test_early_stopping_keeps_every_verdict_and_saves_calls(tmp_path, fake):
    early = run(write_project(tmp_path / "early", seed=3))
    full = run(write_project(tmp_path / "full", seed=3, recall_extra="early_stop = false"))
    e, f = early.prompt("qa").recall, full.prompt("qa").recall

    assert verdicts(early) == verdicts(full)
    assert {"pass", "fail"} <= set(verdicts(full).values())  # the curve gives both kinds of cell
    planned = 3 * 5 * 5
    assert f.calls == planned
    assert f.saved_calls == 0
    assert e.calls < planned
    assert e.saved_calls == planned - e.calls == early.totals.saved_calls
    # the final verdict of the full run follows from all its trials; the early run reached the same
    for c in f.cells:
        assert c.status == final_status(c.hits, c.planned_trials, f.threshold)
    # the early run asked a prefix of the full run's trials and got the same answers
    eo, fo = outcomes(early), outcomes(full)
    assert eo
    assert all(fo[k] == v for k, v in eo.items())
    assert all(c.stopped_early == (c.trials < c.planned_trials) for c in e.cells)
    # speculative calls started ahead and then discarded or cancelled may reach the server (how
    # many depends on timing); counted calls always do
    asked = e.calls + f.calls
    assert asked <= model_calls(fake) <= asked + e.speculative_calls + f.speculative_calls
    assert e.diagnosis.kind == f.diagnosis.kind == "lost-in-the-middle"


def test_outcomes_do_not_depend_on_concurrency(tmp_path, fake):
    one = run(write_project(tmp_path / "one", concurrency=1, seed=5))
    many = run(write_project(tmp_path / "many", concurrency=16, seed=5))
    assert outcomes(one) == outcomes(many)
    assert verdicts(one) == verdicts(many)
    assert one.prompt("qa").recall.calls == many.prompt("qa").recall.calls


def count_in_flight(fake, seconds: float) -> list[int]:
    """Make FAKE answer like a flat 95% model after SECONDS; returns [most requests in flight]."""
    sim = SimulatedModel(flat(0.95), seed=1)
    lock, active, peak = threading.Lock(), [0], [0]

    def responder(body):
        with lock:
            active[0] += 1
            peak[0] = max(peak[0], active[0])
        time.sleep(seconds)
        with lock:
            active[0] -= 1
        return sim(body)

    fake.responder = responder
    return peak


def test_in_flight_calls_never_exceed_concurrency(tmp_path, fake):
    peak = count_in_flight(fake, 0.03)
    res = run(write_project(tmp_path, concurrency=4, sizes=(400, 800)))
    assert 2 <= peak[0] <= 4, peak[0]
    assert res.prompt("qa").recall.calls > 4


@pytest.mark.slow  # 150 answers at 2.5 s each, three times: ~8 s a case
@pytest.mark.parametrize(
    ("concurrency", "headers", "opens"),
    [("auto", True, True), ("auto", False, False), (64, True, False)],
    ids=["auto-with-headers", "auto-without-headers", "fixed-64"],
)
def test_auto_concurrency_opens_past_64_only_on_the_providers_word(
    tmp_path, fake, concurrency, headers, opens
):
    """150 trials ready at once (no prefix cache below 1,024 tokens, every trial planned): auto
    opens past its start of 64 when the answers' rate-limit headers show room, and only then."""
    if not headers:
        fake.bucket = None  # like a proxy that strips the rate-limit headers
    # answers slow enough that every trial is built before the first returns, even on a loaded
    # machine (at 1.0 s a busy CI worker had built only 60 when the window could open)
    peak = count_in_flight(fake, 2.5)
    project = write_project(tmp_path, concurrency=concurrency, trials=10, recall_extra="early_stop = false")
    res = run(project)
    assert res.prompt("qa").recall.calls == 150
    assert (peak[0] > 64) == opens, peak[0]
    assert peak[0] <= 150


def test_max_calls_stops_cleanly_with_a_labelled_partial_result(tmp_path, fake):
    res = run(write_project(tmp_path, recall_extra="max_calls = 12"))
    r = res.prompt("qa").recall
    assert r.partial
    assert res.totals.partial
    assert r.partial_reason == "max_calls (12) reached"
    assert r.calls == 12 == model_calls(fake)
    assert any(c.status == "undecided" for c in r.cells)
    assert r.diagnosis.kind == "inconclusive"
    # settled cells keep a verdict; nothing is claimed for cells that never ran
    assert all(c.status == "undecided" for c in r.cells if c.trials == 0)


def test_max_cost_stops_before_crossing_the_cap(tmp_path, fake):
    # ~400-1200 input tokens at $3/M + 32 output at $15/M: roughly $0.002-0.004 per call
    res = run(write_project(tmp_path, recall_extra="max_cost_usd = 0.02"))
    r = res.prompt("qa").recall
    assert r.partial
    assert r.partial_reason == "max_cost_usd ($0.02) reached"
    assert 0 < r.cost_usd <= 0.02
    assert 3 <= r.calls <= 12


def test_a_refused_key_skips_recall_with_the_reason(tmp_path, fake, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-wrong")
    res = run(write_project(tmp_path))
    pr = res.prompt("qa")
    assert pr.recall is None
    assert pr.recall_skipped.startswith("provider unavailable")
    assert "sk-ant-wrong" not in pr.recall_skipped
    assert res.totals.provider_unavailable
    assert res.totals.calls == 0


def test_cache_reuses_an_identical_run_at_zero_calls(tmp_path, fake):
    cfg = write_project(tmp_path / "p")
    store = ResultCache(tmp_path / "cache" / "recall.sqlite")
    first = run(cfg, cache=store)
    sent = model_calls(fake)
    second = run(cfg, cache=store)
    a, b = first.prompt("qa").recall, second.prompt("qa").recall
    assert model_calls(fake) == sent  # not one more request
    assert b.calls == 0
    assert second.totals.calls == 0
    assert b.cached_calls == a.calls == second.totals.cached_calls
    assert b.reused_from == "cache"
    assert a.reused_from is None
    assert verdicts(first) == verdicts(second)
    assert all(ans.cached for c in b.cells for ans in c.answers)
    # a different seed is a different measurement
    third = run(cfg, cache=store, seed=99)
    assert third.prompt("qa").recall.calls > 0


def test_partial_results_are_not_cached(tmp_path, fake):
    cfg = write_project(tmp_path / "p", recall_extra="max_calls = 5")
    store = ResultCache(tmp_path / "c.sqlite")
    run(cfg, cache=store)
    assert len(store) == 0


def test_baseline_with_the_same_hash_costs_nothing(tmp_path, fake):
    cfg = write_project(tmp_path / "p")
    base = run(cfg)
    sent = model_calls(fake)
    head = run(cfg, baseline=base)
    assert model_calls(fake) == sent
    h = head.prompt("qa").recall
    assert h.calls == 0
    assert h.reused_from == "baseline"
    assert h.cached_calls == base.prompt("qa").recall.calls
    # change the prompt: the hash changes and recall is measured again
    (tmp_path / "p" / "prompts" / "qa.j2").write_text(
        "system:\nAnswer from the notes. Be brief.\nuser:\n{{ notes }}\n\n{{ question }}\n"
    )
    changed = run(cfg, baseline=base)
    assert changed.prompt("qa").recall.calls > 0
    assert changed.prompt("qa").recall.settings_hash != base.prompt("qa").recall.settings_hash


def test_settings_hash_tracks_what_changes_a_result(tmp_path):
    cfg_path = write_project(tmp_path)
    config = load_config(cfg_path)
    prompt = config.prompts["qa"]

    def digest(p, **kw):
        args = {"content_hash": "abc", "fixture": "fixtures/qa.yaml", "sizes": [400, 800]} | kw
        return engine.settings_hash(config, p, **args)

    base = digest(prompt)
    recall = prompt.recall
    assert digest(prompt.model_copy(update={"recall": recall.model_copy(update={"concurrency": 2})})) == base
    assert digest(prompt.model_copy(update={"recall": recall.model_copy(update={"max_calls": 9})})) == base
    assert digest(prompt.model_copy(update={"recall": recall.model_copy(update={"seed": 1})})) != base
    assert digest(prompt.model_copy(update={"recall": recall.model_copy(update={"threshold": 0.9})})) != base
    assert digest(prompt.model_copy(update={"model": "claude-haiku-5-5"})) != base
    assert digest(prompt, content_hash="abd") != base
    assert digest(prompt, sizes=[400]) != base


def test_overrides_apply_and_invalid_trials_is_a_config_error(tmp_path, fake):
    res = run(write_project(tmp_path), seed=42, trials=2)
    r = res.prompt("qa").recall
    assert r.seed == 42
    assert all(c.planned_trials == 2 for c in r.cells)
    from needle_action.core.errors import ConfigError

    with pytest.raises(ConfigError):
        engine.effective_prompt(load_config(write_project(tmp_path)).prompts["qa"], RecallOverrides(trials=0))


def test_prompts_without_slots_or_disabled_are_skipped_with_a_reason(tmp_path, fake):
    cfg = write_project(tmp_path)
    text = cfg.read_text()
    cfg.write_text(
        text + '\n[prompts.plain]\ntemplate = "prompts/qa.j2"\nfixtures = ["fixtures/qa.yaml"]\n'
        '\n[prompts.off]\ntemplate = "prompts/qa.j2"\nfixtures = ["fixtures/qa.yaml"]\n'
        'context_var = "notes"\nquestion_var = "question"\n[prompts.off.recall]\nenabled = false\n'
    )
    res = run(cfg, trials=1)
    assert "context_var" in res.prompt("plain").recall_skipped
    assert res.prompt("off").recall_skipped == "recall.enabled = false"
    assert res.prompt("qa").recall is not None


def test_auto_sizes_ladder():
    assert engine.auto_sizes(200_000, 1024) == [2000, 8000, 32000, 128000, 198976]
    assert engine.auto_sizes(4096, 512) == [2000, 3584]
    assert engine.auto_sizes(4096, 512, min_size=2500) == [3584]
    assert engine.auto_sizes(9000, 1000) == [2000, 8000]  # 8000 is the window's top already


def test_context_window_from_table_and_local_n_ctx(tmp_path):
    config = load_config(write_project(tmp_path))
    prompt = config.prompts["qa"]
    assert engine.context_window(prompt) == 200_000  # claude-* in data/context_windows.toml
    assert engine.context_window(prompt.model_copy(update={"model": "gpt-4.1-mini"})) == 1_047_576
    from needle_action.config import ProviderSettings

    local = prompt.model_copy(
        update={
            "provider": "local",
            "model": "gemma3-270m",
            "providers": {"local": ProviderSettings(n_ctx=4096)},
        }
    )
    assert engine.context_window(local) == 4096


def test_auto_sizes_run_against_the_fake(tmp_path, fake, monkeypatch):
    # a 3,600-token window minus 256 reserved: the ladder is [2000, 3344]
    monkeypatch.setattr(engine, "context_window", lambda prompt, provider=None: 3600)
    res = run(write_project(tmp_path, sizes="auto", depths=(0.0, 1.0)), trials=1)
    r = res.prompt("qa").recall
    assert sorted({c.size for c in r.cells}) == [2000, 3344]
    assert all(abs(c.prompt_tokens - c.size) <= c.size * 0.02 for c in r.cells)


def _put_many(path: str, worker: int) -> int:
    from needle_action.results import RecallDiagnosis, RecallResult

    store = ResultCache(path)
    for i in range(15):
        store.put(
            RecallResult(
                provider="anthropic",
                model="m",
                fixture=None,
                needle_style="codeword",
                scoring="strict",
                threshold=0.8,
                seed=i,
                settings_hash=f"{worker}-{i}",
                cells=[],
                effective_context=None,
                diagnosis=RecallDiagnosis(kind="all-pass", summary="s", fix="f"),
                calls=i,
            )
        )
        stored = store.get(f"{worker}-{i}")
        assert stored is not None
        assert stored.calls == i
    return worker


@pytest.mark.slow  # >= 3 s (CONTRIBUTING: the fast tier stays under 2 minutes)
def test_result_cache_is_safe_for_concurrent_processes(tmp_path):
    import multiprocessing

    path = str(tmp_path / "shared" / "recall.sqlite")
    with multiprocessing.get_context("spawn").Pool(4) as pool:
        assert sorted(pool.starmap(_put_many, [(path, w) for w in range(4)])) == [0, 1, 2, 3]
    store = ResultCache(path)
    assert len(store) == 60
    assert store.get("3-14").calls == 14
    assert store.get("nope") is None
    import sqlite3

    assert sqlite3.connect(path).execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def _open_cache(path: str) -> str:
    try:
        ResultCache(path)
    except Exception as exc:  # noqa: BLE001 - reported back to the parent as text
        return repr(exc)
    return "ok"


def test_many_processes_opening_a_fresh_cache_file_together_all_succeed(tmp_path):
    # switching a new file to WAL raced: ~1 in 40 simultaneous opens failed with "database is locked"
    import multiprocessing

    paths = [str(tmp_path / f"round{r}" / "recall.sqlite") for r in range(60)]
    with multiprocessing.get_context("fork").Pool(8) as pool:
        outcomes = [o for p in paths for o in pool.map(_open_cache, [p] * 8)]
    assert [o for o in outcomes if o != "ok"] == []


# -- runs cut short, lost trials, pooled history --------------------------------------------------

RETRIES = "\n[defaults.providers.anthropic]\nmax_retries = {n}\n"


def _with_retries(cfg, n: int):
    cfg.write_text(cfg.read_text().replace("\n[prompts.qa]", RETRIES.format(n=n) + "\n[prompts.qa]", 1))
    return cfg


def test_a_call_that_exhausts_its_retries_loses_one_trial_not_the_run(tmp_path, fake):
    from needle_action.pipeline.policy import results_exit_code

    # 60% of attempts fail (429, retried at once), 3 attempts a call: ~22% of calls are lost
    fake.faults = Faults(rate=0.6, kinds=("429",), retry_after_s=0.001, max_consecutive=10)
    fake.responder = SimulatedModel(flat(0.97), seed=2)
    cfg = _with_retries(write_project(tmp_path, concurrency=1, recall_extra="early_stop = false"), 2)
    res = run(cfg, seed=4)
    r = res.prompt("qa").recall
    assert r.lost_trials > 0
    assert not r.partial
    assert r.partial_reason is None
    assert r.calls + r.lost_trials == 3 * 5 * 5  # every planned trial was asked
    assert sum(c.trials for c in r.cells) == r.calls
    assert results_exit_code(res, stages=("recall",)) == 0


def test_a_provider_that_dies_mid_run_gives_a_partial_result_that_never_passes(tmp_path, fake):
    from needle_action.pipeline.policy import results_exit_code

    sim, answered = SimulatedModel(flat(0.97), seed=3), []

    def dies_after_12(body):
        # the provider goes away mid-run: every later call fails (500), whatever the retries
        if len(answered) >= 12:
            raise RuntimeError("down")
        answered.append(1)
        return sim(body)

    fake.responder = dies_after_12
    cfg = _with_retries(write_project(tmp_path, concurrency=4, recall_extra="early_stop = false"), 1)
    res = run(cfg)
    r = res.prompt("qa").recall
    assert r.partial
    assert r.partial_reason.startswith("provider unavailable: ")
    assert "in a row failed after every retry" in r.partial_reason
    assert r.calls == 12
    assert r.status == "partial"
    assert r.diagnosis.kind == "inconclusive"
    assert res.recall_status == "partial"
    assert res.totals.provider_unavailable
    assert results_exit_code(res, stages=("recall",)) == 3  # an outage, never a pass


@pytest.mark.slow  # >= 3 s (CONTRIBUTING: the fast tier stays under 2 minutes)
def test_earlier_runs_with_other_seeds_pool_into_the_sample(tmp_path, fake):
    cfg = write_project(tmp_path / "p", recall_extra="early_stop = false")
    store = ResultCache(tmp_path / "cache.sqlite")
    for seed in (1, 2):
        run(cfg, cache=store, seed=seed)
    run(cfg, cache=store, seed=2)  # the same seed again: the same trials, counted once
    first = run(cfg, cache=store).prompt("qa").recall
    assert first.history is not None
    assert first.history.runs == 2
    assert first.history.seeds == [1, 2]
    assert first.history.trials() == 2 * 3 * 5 * 5
    sent = model_calls(fake)
    again = run(cfg, cache=store).prompt("qa").recall  # an unchanged base: 0 calls, still pooled
    assert model_calls(fake) == sent
    assert again.calls == 0
    assert again.reused_from == "cache"
    assert again.history == first.history
    # curtailed runs (early stopping) never join a pool: their counts depend on their answers
    curtailed = write_project(tmp_path / "q")  # the same prompt, with early stopping
    for seed in (5, 6):
        run(curtailed, cache=store, seed=seed)
    assert run(curtailed, cache=store).prompt("qa").recall.history.seeds == [1, 2]
