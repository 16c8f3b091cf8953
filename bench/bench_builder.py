"""Builder overhead benchmark (not a test): recall of a prompt built in code against the fake
Anthropic API at 500 ms a call, trials built in batches (what needle does) and one call per trial
(the batching switched off), with the time spent waiting for the builder's worker against the run's
wall time (issue 19: at most 20%).

The prompt is examples/agent's ``build_support`` (3 tool schemas, the search call, the retrieved
chunks as its tool_result), on a grid of 2 sizes x 5 depths x 5 trials, early stopping off so every
trial is asked. Reports per mode: wall time, builder calls, request frames (batches), worker
processes started, seconds in builder round trips and their share of the wall time, and whether
the two modes sent the same requests (the multiset of request bodies).

    TIKTOKEN_CACHE_DIR=/tmp/tkc python3 bench/bench_builder.py [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from unittest import mock

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from needle_action.assemble.builder import client as builder  # noqa: E402
from needle_action.config import load_config  # noqa: E402
from needle_action.core import environment  # noqa: E402
from needle_action.pipeline.measure import RecallOverrides, run_recall  # noqa: E402
from needle_action.recall.run import prebuild  # noqa: E402
from needle_action.tokens import tiktoken_cache  # noqa: E402
from tests.fakes.anthropic_server import FakeAnthropic  # noqa: E402
from tests.fakes.simulated_model import SimulatedModel, u_shape  # noqa: E402

SIZES = [1500, 3000]
DEPTHS = [0.0, 0.25, 0.5, 0.75, 1.0]
TRIALS = 5
CURVE = u_shape(edge=0.97, middle=0.15, margin=0.02)


def example_config(root: Path, concurrency: int):
    """examples/ copied to ROOT, its builder prompt pointed at the Anthropic API (the fake)."""
    shutil.copytree(REPO / "examples", root, dirs_exist_ok=True)
    config = load_config(root / "needle.toml")
    prompt = config.prompts["support_built"]
    recall = prompt.recall.model_copy(
        update={
            "sizes": SIZES,
            "depths": DEPTHS,
            "trials": TRIALS,
            "early_stop": False,
            "concurrency": concurrency,
            "seed": 3,
        }
    )
    config.prompts = {
        "support_built": prompt.model_copy(
            update={
                "provider": "anthropic",
                "model": "claude-sonnet-5-5",
                "tokenizer": "tiktoken:o200k_base",
                "tokenizer_safety_factor": 1.0,
                "max_input_tokens": 8000,
                "recall": recall,
            }
        )
    }
    return config


def one_run(config, fake, *, batched: bool) -> dict:
    builder.close_all()  # a fresh worker per mode: its start-up is part of what is measured
    fake.reset()
    before = builder.usage()
    with (
        mock.patch.object(prebuild, "prefetch", prebuild.prefetch if batched else lambda *a: 0),
        mock.patch.object(builder, "MAX_BATCH", builder.MAX_BATCH if batched else 1),
    ):
        started = time.perf_counter()
        results = run_recall(config, overrides=RecallOverrides(), cache=False)
        wall = time.perf_counter() - started
        starts = builder.workers_started()
    calls, batches, seconds = (a - b for a, b in zip(builder.usage(), before, strict=True))
    bodies = Counter(
        json.dumps(r["json"], sort_keys=True) for r in fake.requests if r["path"].endswith("/v1/messages")
    )
    recall = results.prompt("support_built").recall
    return {
        "wall_s": round(wall, 2),
        "trials_asked": recall.calls,
        "builder_calls": calls,
        "request_frames": batches,
        "workers_started": starts,
        "builder_s": round(seconds, 3),
        "builder_share": round(seconds / wall, 4),
        "_bodies": bodies,
        "_cells": [(c.size, c.depth, c.hits, c.trials) for c in recall.cells],
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--latency", type=float, default=0.5, help="fake API latency per call, seconds")
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--json", type=Path, help="write the measurements here")
    args = ap.parse_args()

    os.environ.setdefault("TIKTOKEN_CACHE_DIR", str(environment.tiktoken_cache_dir()))
    tiktoken_cache.seed(os.environ["TIKTOKEN_CACHE_DIR"])
    config = example_config(Path(tempfile.mkdtemp(prefix="needle-bench-builder-")), args.concurrency)
    report: dict = {
        "prompt": "examples/agent/support.py:build_support",
        "sizes": SIZES,
        "depths": DEPTHS,
        "trials": TRIALS,
        "latency_s": args.latency,
        "concurrency": args.concurrency,
        "cpus": os.cpu_count(),
    }
    with FakeAnthropic(SimulatedModel(CURVE, seed=3), latency_s=args.latency) as fake:
        os.environ["ANTHROPIC_BASE_URL"] = fake.base_url
        os.environ["ANTHROPIC_API_KEY"] = fake.api_key
        one_run(config, fake, batched=True)  # warm-up: tokenizers, the fake's own counting
        per_trial = one_run(config, fake, batched=False)
        batched = one_run(config, fake, batched=True)
    builder.close_all()
    report["same_requests"] = per_trial.pop("_bodies") == batched.pop("_bodies")
    report["same_cells"] = per_trial.pop("_cells") == batched.pop("_cells")
    report["per_trial"], report["batched"] = per_trial, batched
    print(json.dumps(report, indent=2))
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    ok = report["same_requests"] and report["same_cells"] and batched["builder_share"] <= 0.2
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
