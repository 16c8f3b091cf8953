"""The embedded model's side of prefix reuse, as pure functions: the order its trials are asked in,
when generation stops, what a call is counted as, and an identical request answered once."""

from __future__ import annotations

import itertools

from needle_action.providers.local import provider as local_module
from needle_action.providers.local.decode import line_done
from needle_action.providers.local.provider import LocalProvider, LocalStats, trace_line
from needle_action.recall.run.prefix import sequential_order


def test_trials_go_prompt_by_prompt_deepest_cell_first_a_cells_trials_together():
    grid = list(itertools.product(["b_prompt", "a_prompt"], [640], [0.0, 0.5, 1.0], [0, 1]))
    order = sorted(grid, key=lambda g: sequential_order(True, *g))
    assert [(p, d, t) for p, _, d, t in order[:6]] == [
        ("a_prompt", 1.0, 0),
        ("a_prompt", 1.0, 1),
        ("a_prompt", 0.5, 0),
        ("a_prompt", 0.5, 1),
        ("a_prompt", 0.0, 0),
        ("a_prompt", 0.0, 1),
    ]
    assert {p for p, *_ in order[6:]} == {"b_prompt"}  # never interleaved: the KV state is one prompt's


def test_gold_trials_go_trial_by_trial_each_trials_depths_deepest_first():
    # a gold trial orders the fixture's other documents its own way, the same at every depth: it
    # shares its text with its own other depths, not with the cell's other trials
    grid = list(itertools.product(["p"], [640], [0.0, 0.5, 1.0], [0, 1]))
    order = sorted(grid, key=lambda g: sequential_order(True, *g, own_hay=True))
    assert [(d, t) for _, _, d, t in order] == [(1.0, 0), (0.5, 0), (0.0, 0), (1.0, 1), (0.5, 1), (0.0, 1)]


def test_needed_trials_come_before_speculative_ones():
    assert sequential_order(True, "z", 2000, 0.0, 5) < sequential_order(False, "a", 100, 1.0, 0)


def test_generation_stops_once_the_first_non_empty_line_is_complete():
    assert not line_done(" The code is")
    assert not line_done("\n\n")  # a leading blank line is not the answer yet
    assert not line_done("\n  \nThe code")
    assert line_done(" The code is X.\n")
    assert line_done("\nX-1\nmore")


def test_a_call_is_counted_and_traced():
    reply = {
        "usage": {"prompt_tokens": 641, "completion_tokens": 9},
        "reused": 512,
        "evaluated": 129,
        "generated": 9,
        "eval_s": 0.5,
        "seconds": 0.55,
    }
    stats = LocalStats()
    stats.add(reply, 0.6)
    stats.add({**reply, "repeated": True, "reused": 0, "evaluated": 0, "generated": 0}, 0.0)
    assert (stats.calls, stats.repeated, stats.prompt_tokens) == (2, 1, 1282)
    assert (stats.reused_tokens, stats.evaluated_tokens, stats.generated_tokens) == (512, 129, 9)
    assert "641 prompt tokens (512 reused, 129 evaluated), 9 generated" in trace_line(reply, 0.6)


def test_an_identical_request_is_answered_once(monkeypatch):
    provider = LocalProvider(n_ctx=2048)
    asked = []

    def ask(messages, max_output_tokens):
        asked.append(messages)
        return {"text": f"answer {len(asked)}", "usage": {"prompt_tokens": 10}, "evaluated": 10}

    monkeypatch.setattr(provider, "_ask", ask)
    one = [{"role": "user", "content": "What is the code?"}]
    other = [{"role": "user", "content": "What is the other code?"}]
    assert provider._run(one, 16)["text"] == "answer 1"
    assert provider._run(other, 16)["text"] == "answer 2"
    again = provider._run(one, 16)
    assert again["text"] == "answer 1"
    assert again["repeated"]
    assert provider._run(one, 32)["text"] == "answer 3"  # another answer length is another request
    assert len(asked) == 3
    assert provider.stats.repeated == 1
    assert provider.stats.evaluated_tokens == 30
    monkeypatch.setattr(local_module, "ANSWERS_KEPT", 1)  # the memory is bounded: oldest forgotten
    provider._run([{"role": "user", "content": "A third question?"}], 16)
    assert provider._run(one, 16)["text"] == "answer 5"
    assert len(asked) == 5
