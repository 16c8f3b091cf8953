"""What the benchmarks share (not a test): every planned trial of a config, built as the engine
builds it, for the benchmarks that answer the same prompts another way (the latency floor,
promptfoo, the embedded model with and without KV reuse)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from needle_action.recall.plan.prompt import trial_rng
from needle_action.recall.trials.haystack import HaystackBuilder
from needle_action.recall.trials.needles import make_needle
from needle_action.tokens import get_counter


def _needle(prompt: Any, builder: HaystackBuilder, size: int, depth: float, trial: int) -> Any:
    """The needle of one trial, drawn as the engine draws it (the first style's)."""
    rs = prompt.recall
    rng = trial_rng(rs.seed, prompt.name, size, depth, trial, style=rs.styles[0])
    return make_needle(rs, rng, gold=builder.gold_needle)


def planned_trials(config: Any) -> Iterator[tuple[Any, str, Any]]:
    """``(prompt, "name:size:depth:trial", built trial)`` for each trial of each recall-enabled
    prompt of CONFIG (a loaded config), in plan order; trial 0's needle is every trial's reference
    (the one a trial's haystack must not repeat)."""
    for prompt in config.prompts.values():
        rs = prompt.recall
        if not rs.enabled:
            continue
        counter = get_counter(prompt.tokenizer, model=prompt.model, settings=prompt)
        builder = HaystackBuilder(config, prompt, counter, seed=rs.seed)
        for size in rs.sizes:
            for depth in rs.depths:
                ref = _needle(prompt, builder, size, depth, 0)
                for t in range(rs.trials):
                    trial = builder.build(size, depth, _needle(prompt, builder, size, depth, t), t, ref)
                    yield prompt, f"{prompt.name}:{size}:{depth}:{t}", trial
