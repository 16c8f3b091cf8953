"""The baseline the recall benchmark compares against: a needle test written the way the seed
article writes it. One request at a time, a fixed number of trials per position, a 500 ms pause
after every call "to keep the test polite against the API rate limiter", no early stopping.

It asks exactly the same questions as our engine (same haystack builder, same per-trial needles,
same scoring) so the two runs do the same work and their verdicts can be compared cell by cell.
Not a test and not part of the package: ``bench/bench_recall.py`` imports it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import anthropic

from needle_action.recall.plan.prompt import trial_rng
from needle_action.recall.trials.needles import make_needle
from needle_action.recall.trials.scoring import score
from needle_action.stats.cells import final_status

PAUSE_S = 0.5  # the seed article's `await sleep(500)` between calls


@dataclass
class SeedLoopResult:
    calls: int = 0
    seconds: float = 0.0
    hits: dict[tuple[int, float], int] = field(default_factory=dict)
    trials: dict[tuple[int, float], int] = field(default_factory=dict)

    def verdicts(self, threshold: float, planned: int) -> dict[tuple[int, float], str]:
        return {k: final_status(self.hits[k], planned, threshold) for k in self.hits}


def run_seed_loop(
    prompt, builder, *, base_url: str, api_key: str, pause_s: float = PAUSE_S
) -> SeedLoopResult:
    """Every size x depth x trial of PROMPT's recall settings, strictly one after another."""
    rs = prompt.recall
    client = anthropic.Anthropic(base_url=base_url, api_key=api_key, max_retries=6)
    out = SeedLoopResult()
    started = time.perf_counter()
    for size in rs.sizes:
        for depth in rs.depths:
            key = (size, depth)
            out.hits[key] = out.trials[key] = 0
            reference = make_needle(rs, trial_rng(rs.seed, prompt.name, size, depth, 0, style=rs.styles[0]))
            for trial in range(rs.trials):
                needle = make_needle(
                    rs, trial_rng(rs.seed, prompt.name, size, depth, trial, style=rs.styles[0])
                )
                built = builder.build(size, depth, needle, trial, reference)  # the engine's prompt
                message = client.messages.create(
                    model=prompt.model,
                    max_tokens=rs.max_output_tokens,
                    system=built.rendered.system or anthropic.NOT_GIVEN,
                    messages=[{"role": m.role, "content": m.content} for m in built.rendered.messages],
                )
                text = "".join(block.text for block in message.content if block.type == "text")
                out.calls += 1
                out.trials[key] += 1
                out.hits[key] += int(score(text, needle, rs))
                time.sleep(pause_s)
    out.seconds = time.perf_counter() - started
    client.close()
    return out
