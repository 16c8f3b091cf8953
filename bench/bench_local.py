"""Embedded-model benchmark (not a test): KV reuse at fixed split points vs a reset before every
prompt, on the README example's trial prompts.

Builds every trial prompt of the example grid (examples/needle.toml), answers them on Gemma 3 270M
three ways -- (a) reset before each prompt (the reference), (b) with prefix reuse in the order the
scheduler asks them (a cell's trials back to back), (c) with prefix reuse in a shuffled order --
and reports seconds per call and whether every answer of (b) and (c) equals (a).

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
from needle_action.providers.local import LocalProvider  # noqa: E402
from needle_action.providers.registry import local_n_ctx  # noqa: E402


def prompts(limit: int | None) -> list[tuple[str, object]]:
    config = load_config(REPO / "examples" / "needle.toml")
    out = [(key, trial.rendered) for _, key, trial in planned_trials(config)]
    return out[:limit] if limit else out


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
    reset = LocalProvider(settings=None, n_ctx=n_ctx, reuse_prefix=False)
    answer_all(reset, items[:1])  # load the model outside the clock
    ref, t_reset = answer_all(reset, items)
    grouped, t_grouped = answer_all(LocalProvider(settings=None, n_ctx=n_ctx), items)
    shuffled_items = list(items)
    random.Random(7).shuffle(shuffled_items)
    shuffler = LocalProvider(settings=None, n_ctx=n_ctx)
    shuffled, t_shuffled = answer_all(shuffler, shuffled_items)
    n = len(items)
    report = {
        "calls": n,
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
