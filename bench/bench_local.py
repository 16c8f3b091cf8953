"""Embedded-model benchmark (not a test): KV reuse at fixed split points vs a reset before every
prompt, on the README example's trial prompts.

Builds every trial prompt of the example grid (examples/needle.toml), answers them on Gemma 3 270M
three ways -- (a) reset before each prompt (the reference), (b) with prefix reuse in the order the
scheduler asks them (``recall.prefix.sequential_order``: prompt by prompt, deepest cell first, a
cell's trials back to back), (c) with prefix reuse in a shuffled order -- and reports seconds per
call, the prompt tokens each arm made llama.cpp evaluate (its own counters: deterministic, unlike
the seconds on a shared machine) and whether every answer of (b) and (c) equals (a).

    python3 bench/bench_local.py [--json out.json] [--limit N]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench._common import planned_trials  # noqa: E402
from needle_action.config import load_config  # noqa: E402
from needle_action.providers.local.provider import LocalProvider  # noqa: E402
from needle_action.providers.registry import local_n_ctx  # noqa: E402
from needle_action.recall.run.prefix import sequential_order  # noqa: E402


def prompts(limit: int | None) -> list[tuple[str, object]]:
    config = load_config(REPO / "examples" / "needle.toml")
    out = [(key, trial.rendered) for _, key, trial in planned_trials(config)]
    ranks = {name: rank for rank, name in enumerate(config.prompts)}
    out.sort(key=lambda item: _order(item[0], ranks))  # as the scheduler asks a sequential provider
    return out[:limit] if limit else out


def _order(key: str, ranks: dict[str, int]) -> tuple[float, ...]:
    name, size, depth, trial = key.rsplit(":", 3)
    return sequential_order(True, ranks[name], int(size), float(depth), int(trial))


def answer_all(provider: LocalProvider, items) -> tuple[dict[str, str], float]:
    answers = {}
    started = time.perf_counter()
    for key, rendered in items:
        answers[key] = provider._run(provider.messages(rendered), 16)["text"]  # noqa: SLF001
    return answers, time.perf_counter() - started


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", type=Path)
    ap.add_argument("--limit", type=int)
    args = ap.parse_args()
    config = load_config(REPO / "examples" / "needle.toml")
    n_ctx = local_n_ctx(next(iter(config.prompts.values())))
    items = prompts(args.limit)
    warm = LocalProvider(settings=None, n_ctx=n_ctx, reuse_prefix=False)
    answer_all(warm, items[:1])  # load the model outside the clock
    reset = LocalProvider(settings=None, n_ctx=n_ctx, reuse_prefix=False)
    ref, t_reset = answer_all(reset, items)
    grouped_provider = LocalProvider(settings=None, n_ctx=n_ctx)
    grouped, t_grouped = answer_all(grouped_provider, items)
    shuffled_items = list(items)
    random.Random(7).shuffle(shuffled_items)
    shuffler = LocalProvider(settings=None, n_ctx=n_ctx)
    shuffled, t_shuffled = answer_all(shuffler, shuffled_items)
    n = len(items)
    report = {
        "calls": n,
        "prompt_tokens": grouped_provider.stats.prompt_tokens,
        "evaluated_reset": reset.stats.evaluated_tokens,
        "evaluated_grouped": grouped_provider.stats.evaluated_tokens,
        "evaluated_shuffled": shuffler.stats.evaluated_tokens,
        "repeated_grouped": grouped_provider.stats.repeated,
        "generated_grouped": grouped_provider.stats.generated_tokens,
        "reset_s_per_call": round(t_reset / n, 3),
        "reuse_grouped_s_per_call": round(t_grouped / n, 3),
        "reuse_shuffled_s_per_call": round(t_shuffled / n, 3),
        "speedup_grouped": round(t_reset / t_grouped, 2),
        "speedup_shuffled": round(t_reset / t_shuffled, 2),
        "identical_grouped": sum(grouped[k] == ref[k] for k in ref),
        "identical_shuffled": sum(shuffled[k] == ref[k] for k in ref),
        "differences": {
            k: [ref[k], grouped[k], shuffled[k]] for k in ref if not (ref[k] == grouped[k] == shuffled[k])
        },
    }
    text = json.dumps(report, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")
    return 0 if report["identical_grouped"] == n == report["identical_shuffled"] else 1


if __name__ == "__main__":
    sys.exit(main())
