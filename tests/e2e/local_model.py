"""Shared by the e2e tests that run the embedded model (Gemma 3 270M, llama.cpp in-process): the
notes prompt they probe, the needle.toml they write and the offline environment they run in."""

from __future__ import annotations

import json
from pathlib import Path

from tests.builders import prompt_table
from tests.needle_cli import needle_env

NOTES_TEMPLATE = """user:
Read the notes below, then answer the question.

<notes>
{{ notes }}
</notes>

Question: {{ question }}
"""

NOTES_PROMPT = prompt_table("notes", "notes.j2", "notes.yaml", "notes", "question", 2000)

# what every probe of these tests shares unless it says otherwise: one depth, two trials, the
# codeword needle scored by "contains" (the 270M model answers in fragments), a fixed seed
RECALL_DEFAULTS: dict[str, object] = {
    "depths": [0.5],
    "trials": 2,
    "needle": "codeword",
    "scoring": "contains",
    "seed": 3,
}


def local_config(prompts: str, *, model: str = "gemma3-270m", **recall: object) -> str:
    """A needle.toml on the embedded model: PROMPTS (TOML tables) with ``[defaults.recall]`` set to
    :data:`RECALL_DEFAULTS` updated by RECALL (values written as JSON, which TOML reads alike)."""
    settings = "\n".join(
        f"{key} = {json.dumps(value)}" for key, value in {**RECALL_DEFAULTS, **recall}.items()
    )
    return (
        f'[defaults]\nprovider = "local"\nmodel = "{model}"\ntokenizer = "local"\nreserve_output_tokens = 64\n\n'
        f"[defaults.recall]\n{settings}\n\n{prompts}"
    )


def offline_env(tmp_path: Path) -> dict[str, str]:
    """The child's environment: its own recall cache under TMP_PATH and no Anthropic key, so that
    nothing but the embedded model can answer."""
    env = needle_env(NEEDLE_CACHE_DIR=str(tmp_path / "cache"))
    env.pop("ANTHROPIC_API_KEY", None)
    return env
