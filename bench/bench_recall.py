"""Recall benchmark (not a test): the same needle work against the fake Anthropic API with 500 ms
latency, done three ways:

  (a) the seed article's loop (bench/seed_loop.py): one call at a time, a 500 ms pause after each,
      fixed trials, no early stopping;
  (b) our engine at concurrency 16 with early stopping;
  (c) our engine at concurrency 16 without early stopping.

Work: 4 sizes (~1.25K-2.75K tokens, ~2K on average) x 5 depths x 5 trials = 100 planned calls on a
U-shaped simulated model, so some cells pass and some fail. Reports wall time, calls, the (a)/(b)
ratio (target >= 25x), calls saved by early stopping, and whether the three runs reach the same
verdict in every cell.

    TIKTOKEN_CACHE_DIR=/tmp/tkc python3 bench/bench_recall.py [--json out.json] [--skip-seed-loop]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.seed_loop import run_seed_loop  # noqa: E402
from needle_action.config import load_config  # noqa: E402
from needle_action.core import environment  # noqa: E402
from needle_action.pipeline.measure import RecallOverrides, run_recall  # noqa: E402
from needle_action.recall.plan.prompt import effective_prompt  # noqa: E402
from needle_action.recall.trials.haystack import HaystackBuilder  # noqa: E402
from needle_action.tokens import get_counter, tiktoken_cache  # noqa: E402
from tests.fakes.anthropic_server import FakeAnthropic  # noqa: E402
from tests.fakes.simulated_model import SimulatedModel, u_shape  # noqa: E402
from tests.integration.recall_helpers import write_project  # noqa: E402

SIZES = (1250, 1750, 2250, 2750)
DEPTHS = (0.0, 0.25, 0.5, 0.75, 1.0)
TRIALS = 5
CURVE = u_shape(edge=0.97, middle=0.15, margin=0.02)


def engine_run(config_path: Path, *, early_stop: bool, seed: int) -> tuple[float, object]:
    config = load_config(config_path)
    prompt = config.prompts["qa"]
    config.prompts["qa"] = prompt.model_copy(
        update={"recall": prompt.recall.model_copy(update={"early_stop": early_stop})}
    )
    started = time.perf_counter()
    results = run_recall(config, overrides=RecallOverrides(seed=seed), cache=False)
    return time.perf_counter() - started, results.prompt("qa").recall


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--latency", type=float, default=0.5, help="fake API latency per call, seconds")
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--skip-seed-loop", action="store_true", help="only the engine runs (~100 s saved)")
    ap.add_argument("--json", type=Path, help="write the measurements here")
    args = ap.parse_args()

    os.environ.setdefault("TIKTOKEN_CACHE_DIR", str(environment.tiktoken_cache_dir()))
    tiktoken_cache.seed(os.environ["TIKTOKEN_CACHE_DIR"])
    root = Path(tempfile.mkdtemp(prefix="needle-bench-recall-"))
    config_path = write_project(
        root, sizes=SIZES, depths=DEPTHS, trials=TRIALS, concurrency=args.concurrency, seed=args.seed
    )
    report: dict = {
        "sizes": SIZES,
        "depths": DEPTHS,
        "trials": TRIALS,
        "latency_s": args.latency,
        "concurrency": args.concurrency,
        "planned_calls": len(SIZES) * len(DEPTHS) * TRIALS,
        "cpus": os.cpu_count(),
    }

    with FakeAnthropic(SimulatedModel(CURVE, seed=args.seed), latency_s=args.latency) as fake:
        os.environ["ANTHROPIC_BASE_URL"] = fake.base_url
        os.environ["ANTHROPIC_API_KEY"] = fake.api_key

        # warm-up outside the clock: the fake's and the simulated model's tokenizers, our tokenizer,
        # the first render; otherwise whichever run goes first pays them
        import anthropic

        with anthropic.Anthropic(base_url=fake.base_url, api_key=fake.api_key) as client:
            client.messages.create(
                model="claude-sonnet-5-5",
                max_tokens=8,
                messages=[{"role": "user", "content": "Warm-up. What is the code?"}],
            )
        config = load_config(config_path)
        prompt = effective_prompt(config.prompts["qa"], RecallOverrides(seed=args.seed))
        counter = get_counter(prompt.tokenizer, model=prompt.model, settings=prompt)
        builder = HaystackBuilder(
            config, prompt, counter, seed=prompt.recall.seed, fixture_path=config.recall_fixture(prompt)
        )

        secs_b, early = engine_run(config_path, early_stop=True, seed=args.seed)
        secs_c, full = engine_run(config_path, early_stop=False, seed=args.seed)
        verdict_b = {(c.size, c.depth): c.status for c in early.cells}
        verdict_c = {(c.size, c.depth): c.status for c in full.cells}
        report["engine_early_stop"] = {
            "seconds": round(secs_b, 2),
            "calls": early.calls,
            "saved_calls": early.saved_calls,
            "diagnosis": early.diagnosis.kind,
        }
        report["engine_no_early_stop"] = {
            "seconds": round(secs_c, 2),
            "calls": full.calls,
            "diagnosis": full.diagnosis.kind,
        }
        report["verdicts_match_b_c"] = verdict_b == verdict_c
        report["cells"] = {
            "pass": sum(v == "pass" for v in verdict_c.values()),
            "fail": sum(v == "fail" for v in verdict_c.values()),
            "undecided": sum(v == "undecided" for v in verdict_c.values()),
        }

        if not args.skip_seed_loop:
            seed = run_seed_loop(prompt, builder, base_url=fake.base_url, api_key=fake.api_key)
            verdict_a = seed.verdicts(prompt.recall.threshold, TRIALS)
            report["seed_loop"] = {"seconds": round(seed.seconds, 2), "calls": seed.calls}
            report["verdicts_match_a_b"] = verdict_a == verdict_b
            report["ratio_seed_loop_vs_engine"] = round(seed.seconds / secs_b, 1)
            report["ratio_seed_loop_vs_engine_no_early_stop"] = round(seed.seconds / secs_c, 1)

    print(json.dumps(report, indent=2, default=list))
    if args.json:
        args.json.write_text(json.dumps(report, indent=2, default=list) + "\n")
    ok = report["verdicts_match_b_c"] and report.get("verdicts_match_a_b", True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
