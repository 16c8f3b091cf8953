"""Measure one or several configs through one scheduler (``pipeline.measure_sides``) in a process of
its own, timing the measuring only (imports and tokenizer loading are done first): what the
action does for a pull request's head and base.

    python3 bench/measure_sides.py head/needle.toml [base/needle.toml]
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import anthropic  # noqa: E402,F401 - imported before the clock, like the tokenizer below

from needle_action.config import load_config  # noqa: E402
from needle_action.pipeline.measure import Measure, measure_sides  # noqa: E402
from needle_action.tokens import load_encoding  # noqa: E402


def main() -> int:
    configs = [load_config(Path(a)) for a in sys.argv[1:]]
    load_encoding("o200k_base")
    started = time.perf_counter()
    sides = measure_sides(configs, Measure(), env=os.environ, cache=False)
    seconds = time.perf_counter() - started
    print(
        json.dumps(
            {
                "seconds": round(seconds, 3),
                "calls": sum(r.totals.calls for r in sides),
                "speculative_calls": sum(r.totals.speculative_calls for r in sides),
                "verdicts": [
                    [
                        [p.name, c.size, c.depth, c.status]
                        for p in r.prompts
                        if p.recall
                        for c in p.recall.cells
                    ]
                    for r in sides
                ],
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
