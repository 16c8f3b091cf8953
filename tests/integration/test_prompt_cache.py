"""Prompt caching end to end: the fake's cache rules (what the API documents), the requests the
Anthropic provider shapes, and the engine's bill with caching on and off. Plus Message Batches."""

from __future__ import annotations

import json
from typing import Any

import anthropic
import pytest

from needle_action.config import load_config
from needle_action.pipeline.measure import run_recall
from tests.fakes.anthropic_server import FakeAnthropic
from tests.fakes.simulated_model import SimulatedModel, u_shape
from tests.integration.recall_helpers import verdicts, write_project

MODEL = "claude-sonnet-5-5"
WORDS = " ".join(f"word{i}" for i in range(1500))  # ~3K tokens: above the 1,024-token minimum


def ask(fake: FakeAnthropic, blocks: list[dict]) -> dict:
    client = anthropic.Anthropic(base_url=fake.base_url, api_key=fake.api_key, max_retries=0)
    messages: list[Any] = [{"role": "user", "content": blocks}]  # plain JSON, as a user's code sends it
    msg = client.messages.create(model=MODEL, max_tokens=8, messages=messages)
    return msg.usage.model_dump()


def text(t: str, cache: bool = False) -> dict:
    block: dict[str, Any] = {"type": "text", "text": t}
    if cache:
        block["cache_control"] = {"type": "ephemeral"}
    return block


def test_the_fake_caches_prefixes_by_the_documented_rules():
    with FakeAnthropic() as fake:
        first = ask(fake, [text(WORDS, cache=True), text(" question one?")])
        assert first["cache_creation_input_tokens"] > 1024
        assert first["cache_read_input_tokens"] == 0
        again = ask(fake, [text(WORDS, cache=True), text(" question two?")])
        assert again["cache_read_input_tokens"] == first["cache_creation_input_tokens"]
        assert again["cache_creation_input_tokens"] == 0
        # a longer prompt with a later breakpoint reads the shorter entry through the lookback
        longer = ask(fake, [text(WORDS), text(" more text " * 50, cache=True), text(" q?")])
        assert longer["cache_read_input_tokens"] == first["cache_creation_input_tokens"]
        assert 0 < longer["cache_creation_input_tokens"] < 1024
        # below the minimum nothing is cached, silently
        short = ask(fake, [text("a short prefix", cache=True), text(" q?")])
        assert short["cache_creation_input_tokens"] == short["cache_read_input_tokens"] == 0
        # five breakpoints are refused like the API refuses them
        with pytest.raises(anthropic.BadRequestError, match="maximum of 4"):
            ask(fake, [text(f"part {i} ", cache=True) for i in range(5)])


def test_entries_expire_after_their_ttl():
    with FakeAnthropic(cache_ttl_s=0.2) as fake:
        ask(fake, [text(WORDS, cache=True), text(" q1?")])
        import time

        time.sleep(0.3)
        later = ask(fake, [text(WORDS, cache=True), text(" q2?")])
        assert later["cache_read_input_tokens"] == 0
        assert later["cache_creation_input_tokens"] > 1024


@pytest.fixture
def fake(monkeypatch):
    with FakeAnthropic(SimulatedModel(u_shape(edge=0.97, middle=0.1, margin=0.08), seed=2)) as server:
        yield server.point_env(monkeypatch)


def test_caching_lowers_the_bill_and_changes_no_verdict(tmp_path, fake):
    extra = "early_stop = false"
    sizes = (1500, 2500)
    off = run_recall(
        load_config(
            write_project(tmp_path / "off", sizes=sizes, recall_extra=extra + "\nprompt_cache = false")
        ),
        cache=False,
    )
    marked_off = [
        r for r in fake.requests if r["path"] == "/v1/messages" and "cache_control" in json.dumps(r["json"])
    ]
    on = run_recall(load_config(write_project(tmp_path / "on", sizes=sizes, recall_extra=extra)), cache=False)
    assert not marked_off  # caching off: no marker sent
    assert verdicts(on) == verdicts(off)
    u_on, u_off = on.totals.usage, off.totals.usage
    assert u_off.cache_read_tokens == u_off.cache_write_tokens == 0
    assert u_on.prompt_tokens == u_off.prompt_tokens  # the same text was sent
    assert u_on.cache_read_tokens > 0
    assert u_on.billed_input_tokens < 0.75 * u_off.billed_input_tokens
    assert on.totals.cost_usd < off.totals.cost_usd
    # each size's prefix ladder is written about once, not once per trial
    assert u_on.cache_write_tokens < 0.2 * u_on.cache_read_tokens
    bodies = [r["json"] for r in fake.requests if r["path"] == "/v1/messages"]
    assert all(json.dumps(b).count("cache_control") <= 4 for b in bodies)


def _answers(results) -> dict[tuple[str, int, float, int], tuple[str, bool]]:
    recall = results.prompt("qa").recall
    return {(c.style, c.size, c.depth, a.trial): (a.needle, a.hit) for c in recall.cells for a in c.answers}


@pytest.mark.slow  # >= 3 s (CONTRIBUTING: the fast tier stays under 2 minutes)
def test_several_styles_cache_and_batch_without_changing_an_answer(tmp_path, fake):
    # every style's cells share the scheduler, the prefix ladders and the batch: caching on or off
    # and the batch ask the same trials and judge them the same way
    extra = 'needle = ["codeword", "nonlexical", "absent"]\nearly_stop = false'
    sizes = (1500, 2500)
    off_path = write_project(tmp_path / "off", sizes=sizes, recall_extra=extra + "\nprompt_cache = false")
    off = run_recall(load_config(off_path), cache=False)
    on = run_recall(load_config(write_project(tmp_path / "on", sizes=sizes, recall_extra=extra)), cache=False)
    assert _answers(on) == _answers(off)
    assert {k[0] for k in _answers(on)} == {"codeword", "nonlexical", "absent"}
    assert on.totals.usage.cache_read_tokens > 0
    assert on.prompt("qa").recall.styles == off.prompt("qa").recall.styles
    with off_path.open("a") as fh:
        fh.write("\n[defaults.providers.anthropic]\nbatch_poll_s = 0.05\n")
    batch = run_recall(load_config(off_path), cache=False, batch=True)
    assert _answers(batch) == _answers(off)


def test_batch_gives_the_live_verdicts_at_half_price_and_resumes(tmp_path, fake):
    cfg_path = write_project(tmp_path / "p", recall_extra="prompt_cache = false")
    with cfg_path.open("a") as fh:
        fh.write("\n[defaults.providers.anthropic]\nbatch_poll_s = 0.05\n")
    config = load_config(cfg_path)
    live = run_recall(config, cache=False)
    store = tmp_path / "cache" / "recall.sqlite"
    batch = run_recall(config, cache=str(store), batch=True)
    assert verdicts(batch) == verdicts(live)
    r = batch.prompt("qa").recall
    assert r.batch
    assert fake.batches.created == 1
    sent = r.calls + r.speculative_calls
    per_call_live = live.totals.cost_usd / (live.totals.calls + live.totals.speculative_calls)
    assert abs(r.cost_usd / sent / per_call_live - 0.5) < 0.05
    # an interrupted run: the batch id is in the cache folder, a rerun polls it instead of paying again
    from needle_action.providers.anthropic import write_batch_id

    state_dir = store.parent / "batches"
    assert not list(state_dir.glob("*.json"))  # removed once the results were in
    original = fake.batches.create

    def remember(batch_id, requests):
        made = original(batch_id, requests)
        from needle_action.providers.anthropic import batch_state_path

        write_batch_id(batch_state_path(state_dir, "claude-sonnet-5-5", requests), made.id)
        return made

    fake.batches.create = remember
    run_recall(config, cache=False, batch=True)  # leaves a state file, as an interrupted run would
    fake.batches.create = original
    before = fake.batches.created
    again = run_recall(config, cache=str(store), batch=True)
    assert fake.batches.created == before  # resumed: no new batch
    assert verdicts(again) == verdicts(live)


def test_openai_compatible_servers_get_each_prefix_first_alone(tmp_path, monkeypatch):
    from tests.fakes.openai_server import FakeOpenAI

    sim = SimulatedModel(u_shape(edge=0.97, middle=0.1, margin=0.08), seed=4)
    seen: list[tuple[int, float]] = []

    def responder(body):
        obs = sim.observe(body)
        seen.append((obs.size, obs.depths[0] if obs.depths else -1.0))
        return obs.answer

    with FakeOpenAI(responder) as server:
        cfg_path = write_project(
            tmp_path, sizes=(1500, 2500), model="gpt-4.1", recall_extra="early_stop = false"
        )
        text = cfg_path.read_text().replace('provider = "anthropic"', 'provider = "openai"')
        cfg_path.write_text(text + f'\n[defaults.providers.openai]\nbase_url = "{server.base_url}"\n')
        res = run_recall(load_config(cfg_path), cache=False)
    assert res.prompt("qa").recall.calls == 50
    for size in (1500, 2500):
        # requests whose shared prefix (the text before the needle) is long enough to be cached
        requests = [d for s, d in seen if abs(s - size) < size * 0.1 and d * s > 1100]
        # the deepest needle's first trial writes the longest shared prefix: it goes before the rest
        assert requests, (size, requests[:5])
        assert requests[0] >= max(requests) - 0.02, (size, requests[:5])


def test_a_request_that_reads_a_warm_mark_is_not_held_by_a_shallower_write():
    """Five depths, four breakpoints: the writer leaves one mark for its own cell's first trial to
    write. Meanwhile the deeper cells' trials, whose own mark is warm, read it and go; only a
    request that would write (or read) the mark being written waits."""
    from needle_action.recall.run.prefix import Mark, MarkStates

    now = [0.0]
    states = MarkStates(min_tokens={1: 1024}, clock=lambda: now[0])
    m = [Mark(0, 100 * i, 1100 + 200 * i, f"d{i}") for i in range(5)]  # shallow .. deep
    _, writes = states.plan_request(1, m)  # the writer: its own mark and the 3 largest increments
    assert len(writes) == 4
    assert m[4] in writes
    left = next(x for x in m if x not in writes)
    assert states.blocked(1, m)
    assert states.blocked(1, m[: m.index(left) + 1])
    states.finished(1, None, writes, ok=True)
    _, second = states.plan_request(1, m[: m.index(left) + 1])  # the left-out cell's first trial
    assert second == [left]
    assert states.blocked(1, m[: m.index(left) + 1])  # its cell's other trials wait for it...
    assert not states.blocked(1, m)  # ...but deeper cells' trials read their own warm mark now
    breakpoints, writes = states.plan_request(1, m)
    assert writes == []
    assert [bp.cache for bp in breakpoints] == [False, False, False, False, True]


def test_a_prefix_another_ladder_is_writing_is_written_again_not_waited_for():
    """Head and base (or two sizes over one system prompt) share the text before their shallowest
    needle. The second ladder's writer does not wait a round for the first's write of it: it writes
    its own marks now (paying that shared prefix once more). A request that needs exactly the
    shared mark still waits and reads it; within one ladder nothing changes."""
    from needle_action.recall.run.prefix import Mark, MarkStates

    states = MarkStates(min_tokens={1: 1024}, clock=lambda: 0.0)
    shared = Mark(0, 100, 1400, "system prompt")
    head = [shared, *(Mark(0, 200 * i, 1400 + 300 * i, f"head{i}") for i in range(1, 5))]
    base = [shared, *(Mark(0, 200 * i, 1400 + 280 * i, f"base{i}") for i in range(1, 5))]
    _, head_writes = states.plan_request(1, head, "head")
    assert shared in head_writes
    assert states.blocked(1, head[:3], "head")  # the head's own cells wait for their writer
    assert not states.blocked(1, base, "base")
    _, base_writes = states.plan_request(1, base, "base")
    assert base[-1] in base_writes
    assert shared not in base_writes
    assert states.blocked(1, base[:1], "base")  # the base's shallowest cell reads the shared mark
    assert states.blocked(1, base[:3], "base")  # and its other cells wait for their own writer
    states.finished(1, None, head_writes, ok=True, ladder="head")
    states.finished(1, None, base_writes, ok=True, ladder="base")
    assert not any(states.blocked(1, base[: i + 1], "base") for i in range(5))
