"""A small real project for recall tests: a template with a string context slot, a fixture and a
needle.toml (written with tests/builders.py), plus helpers to run the engine on it against the fake
Anthropic server."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import TYPE_CHECKING

from bench.workload import CLAUDE_DEFAULTS
from needle_action.config import load_config
from needle_action.pipeline.measure import RecallOverrides, run_recall
from needle_action.results import RecallResult, Results
from tests.builders import Project
from tests.needle_cli import needle_env, run_needle

if TYPE_CHECKING:
    from tests.fakes.anthropic_server import FakeAnthropic

TEMPLATE = """system:
Answer from the notes.
user:
{{ notes }}

{{ question }}
"""

FIXTURE = """notes: "The depot opens at nine. Deliveries arrive on the north ramp."
question: "When does the depot open?"
"""

# The fixed text around the slot is ~15 tokens, so at 400-1200 tokens a needle at slot depth 0 or 1
# sits within a few percent of the request's ends; the simulated model's curves use a small margin.
SIZES = (400, 800, 1200)
DEPTHS = (0.0, 0.25, 0.5, 0.75, 1.0)


def write_project(
    root: Path,
    *,
    sizes=SIZES,
    depths=DEPTHS,
    trials: int | str = 5,
    concurrency: int | str = 16,
    seed: int = 0,
    recall_extra: str = "",
    model: str = "claude-sonnet-5-5",
    template: str = TEMPLATE,
    seeds: list[int] | None = None,
) -> Path:
    """Write the project; with SEEDS, one prompt per seed (``qa<seed>``, same template and
    fixture, its own recall seed) so many seeds run in one engine call."""
    sizes_toml = f'"{sizes}"' if isinstance(sizes, str) else f"[{', '.join(str(s) for s in sizes)}]"
    toml = f"""{CLAUDE_DEFAULTS.format(model=model)}
[defaults.recall]
sizes = {sizes_toml}
depths = [{", ".join(repr(float(d)) for d in depths)}]
trials = {f'"{trials}"' if isinstance(trials, str) else trials}
threshold = 0.8
concurrency = {f'"{concurrency}"' if isinstance(concurrency, str) else concurrency}
max_output_tokens = 32
seed = {seed}
{recall_extra}

[prompts.qa]
template = "prompts/qa.j2"
fixtures = ["fixtures/qa.yaml"]
context_var = "notes"
question_var = "question"
"""
    for s in seeds or []:
        toml += f"""
[prompts.qa{s}]
template = "prompts/qa.j2"
fixtures = ["fixtures/qa.yaml"]
context_var = "notes"
question_var = "question"
[prompts.qa{s}.recall]
seed = {s}
"""
    project = Project(root).template("prompts/qa.j2", template).fixture("fixtures/qa.yaml", FIXTURE)
    return project.config(toml, dedent=False).config_path


def base_and_head(tmp: Path, sizes=SIZES) -> tuple[Path, Path]:
    """A pull request's two projects under TMP (``base/``, ``head/``) with auto trials, 16 calls at
    once: the head rewords the template's instruction, so its prompts differ from the base's."""
    base_cfg = write_project(tmp / "base", sizes=sizes, trials="auto", concurrency=16)
    reworded = TEMPLATE.replace("Answer from the notes.", "Answer from the notes, briefly.")
    return base_cfg, write_project(
        tmp / "head", sizes=sizes, trials="auto", concurrency=16, template=reworded
    )


def run(
    config_path: Path,
    *,
    cache=False,
    baseline: Results | None = None,
    only: list[str] | None = None,
    **overrides,
) -> Results:
    config = load_config(config_path)
    return run_recall(
        config, baseline=baseline, only=only, overrides=RecallOverrides(**overrides), cache=cache
    )


def recall_of(results: Results, name: str = "qa") -> RecallResult:
    """The recall result of prompt NAME (the test fails when it has none)."""
    prompt = results.prompt(name)
    assert prompt is not None, name
    assert prompt.recall is not None, name
    return prompt.recall


def verdicts(results: Results, name: str = "qa") -> dict[tuple[int, float], str]:
    recall = recall_of(results, name)
    return {(c.size, c.depth): c.status for c in recall.cells}


def outcomes(results: Results, name: str = "qa") -> dict[tuple[int, float, int], tuple[str, bool]]:
    """Every trial's (expected answer, hit), keyed by (size, depth, trial index)."""
    recall = recall_of(results, name)
    return {(c.size, c.depth, a.trial): (a.needle, a.hit) for c in recall.cells for a in c.answers}


# --------------------------------------------------------------------------- the CLI against the fake

REPO = Path(__file__).resolve().parents[2]


def flat95(depth: float, size: int) -> float:
    return 0.95


def middle_minus_30(depth: float, size: int) -> float:
    # the simulated model sees depth in the whole request: the slot's 0.25-0.75 sit well inside
    return 0.65 if 0.15 < depth < 0.85 else 0.95


def needle_cli(
    args: list[str], fake: FakeAnthropic, cache: Path, *, key: str | None = None
) -> subprocess.CompletedProcess:
    """`needle ARGS` in a real process, pointed at FAKE (with KEY: another API key than the fake's),
    with its own recall cache."""
    env = needle_env(
        ANTHROPIC_BASE_URL=fake.base_url,
        ANTHROPIC_API_KEY=key or fake.api_key,
        NEEDLE_CACHE_DIR=str(cache),
        NO_COLOR="1",
    )
    return run_needle(args, env=env, timeout=600)
