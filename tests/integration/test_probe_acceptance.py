"""Acceptance for issue 10 (probes as hard as the work) against a model that finds facts by word
overlap (tests/fakes/lexical_model.py) behind the fake Anthropic API (real HTTP, real SDK):

* at p = 0.95 the codeword needle passes and the non-lexical needle fails: the matcher cannot link
  "Mara's office is next to the Semperoper." to "Which colleague works in Dresden?";
* the gold document of the bundled RAG example, moved through its retrieved documents, follows the
  fake's positional curve cell by cell;
* absent trials report the fake's hallucination rate within 5 points of the truth over 200 trials,
  and a pull request that makes the model invent answers fails the comparison;
* the results JSON, the terminal and the PR comment name the style of every cell.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import statistics

import pytest
from click.testing import CliRunner

from needle_action.cli import main
from needle_action.compare import compare
from needle_action.config import load_config
from needle_action.pipeline.measure import RecallOverrides, run_recall
from needle_action.recall.trials.probes.bank import NAMES
from needle_action.report.render import render_comment
from tests.builders import Project
from tests.fakes.anthropic_server import FakeAnthropic
from tests.fakes.lexical_model import LexicalModel
from tests.fakes.simulated_model import flat, u_shape
from tests.integration.recall_helpers import TEMPLATE, run, write_project

P = 0.95


@pytest.fixture
def fake(monkeypatch):
    with FakeAnthropic() as server:
        yield server.point_env(monkeypatch)


def _styles(results, name: str = "qa") -> dict:
    return {s.style: s for s in results.prompt(name).recall.styles}


@pytest.mark.slow  # five seeds x two styles x 6 cells x 12 trials
def test_codeword_passes_and_nonlexical_fails_against_a_lexical_matcher(tmp_path, fake):
    model = fake.responder = LexicalModel(flat(P), seed=3)
    seeds = list(range(5))
    config = write_project(
        tmp_path,
        sizes=(400, 1200),
        depths=(0.0, 0.5, 1.0),
        trials=12,
        seeds=seeds,
        recall_extra='needle = ["codeword", "nonlexical"]\nearly_stop = false',
    )
    results = run(config, only=[f"qa{s}" for s in seeds])
    for s in seeds:
        styles = _styles(results, f"qa{s}")
        codeword, nonlexical = styles["codeword"], styles["nonlexical"]
        print(
            f"\nseed {s}: codeword {codeword.rate} ({codeword.status}), nonlexical {nonlexical.rate} ({nonlexical.status})"
        )
        assert codeword.status == "pass"
        assert codeword.diagnosis.kind in ("all-pass", "flaky")
        assert abs(codeword.rate - P) <= 0.06  # found by its words, then the curve
        assert nonlexical.status == "fail"
        assert nonlexical.rate == 0.0
        assert results.prompt(f"qa{s}").recall.status == "fail"  # the hardest probe decides
    # the matcher never reaches a non-lexical fact (each states a bank name); when it "finds"
    # something it is filler that happens to share words ("client", "contractor"), a wrong passage
    asked = [o for o in model.observations if o.question.startswith(("Which", "Who"))]
    assert len(asked) == 5 * 6 * 12
    assert not any(o.found and any(name in o.passage for name in NAMES) for o in asked)


def _rag_project(tmp_path, *, trials: int) -> Project:
    project = Project(tmp_path / "ex").examples()
    project.edit(
        "needle.toml",
        'model = "gemma3-270m"\nprovider = "local"',
        'model = "claude-sonnet-5-5"\nprovider = "anthropic"',
    )
    project.edit(
        "needle.toml",
        'tokenizer = "local"',
        'tokenizer = "tiktoken:o200k_base"\ntokenizer_safety_factor = 1.0',
    )
    project.edit("needle.toml", "sizes = [576]", "sizes = [1000, 2500]")  # the example has 5 depths
    project.edit("needle.toml", "trials = 3", f"trials = {trials}\nearly_stop = false")
    return project.edit("needle.toml", "max_output_tokens = 16", "max_output_tokens = 300")


def _by_cell(observations, cells, trials: int) -> list[tuple]:
    """(cell, its observations): the fake's requests split into two size bands (characters / 4),
    each ordered by where the gold document sat; a cell's trials are the next TRIALS of its band."""
    small, large = min(c.size for c in cells), max(c.size for c in cells)
    cut = (small + large) / 2
    pairs = []
    for size, in_band in ((small, lambda o: o.size < cut), (large, lambda o: o.size >= cut)):
        seen = sorted((o for o in observations if in_band(o)), key=lambda o: o.depth)
        row = sorted((c for c in cells if c.size == size), key=lambda c: c.depth)
        chunks = [seen[i * trials : (i + 1) * trials] for i in range(len(row))]
        for left, right in itertools.pairwise(chunks):
            assert max(o.depth for o in left) <= min(o.depth for o in right)  # ties sit at one place
        pairs += list(zip(row, chunks, strict=True))
    return pairs


@pytest.mark.slow  # 10 cells x 24 trials of 1,000-2,500-token RAG prompts
def test_gold_on_the_rag_example_follows_the_positional_curve(tmp_path, fake):
    curve = u_shape(edge=0.97, middle=0.15, margin=0.05)
    model = fake.responder = LexicalModel(curve, seed=11)
    project = _rag_project(tmp_path, trials=24)
    results = run(project.config_path, only=["rag_answer"])
    recall = results.prompt("rag_answer").recall
    assert {c.style for c in recall.cells} == {"gold"}
    assert all(a.needle == "14 days | fourteen days" for c in recall.cells for a in c.answers)
    assert len(model.observations) == 10 * 24
    assert all(o.found for o in model.observations)  # the matcher finds the gold document by its words
    rates, curve_at = [], []
    for cell, seen in _by_cell(model.observations, recall.cells, 24):
        p = statistics.mean(o.p for o in seen)  # the curve where the gold document really sat
        print(f"\n{cell.size} tok, depth {cell.depth:.2f}: {cell.hits}/{cell.trials}, curve {p:.2f}")
        assert cell.hits == sum(o.answered for o in seen)  # each answer from the gold passage is a hit
        assert abs(cell.rate - p) <= 3 * math.sqrt(p * (1 - p) / cell.trials) + 0.05
        rates.append(cell.rate)
        curve_at.append(p)
    assert statistics.correlation(rates, curve_at) > 0.9
    assert recall.diagnosis.kind == "lost-in-the-middle", recall.diagnosis.summary


def _absent_run(
    tmp_path, fake, *, hallucinate: float, similarity: str, trials: int, template: str = TEMPLATE
):
    fake.responder = model = LexicalModel(flat(P), seed=5, hallucinate=hallucinate)
    config = write_project(
        tmp_path,
        sizes=(400, 800),
        depths=(0.0, 1.0),
        trials=trials,
        template=template,
        recall_extra=f'needle = "absent"\nsimilarity = "{similarity}"\nearly_stop = false',
    )
    return run(config), model


@pytest.mark.slow  # 200 trials
def test_absent_reports_the_hallucination_rate_within_5_points(tmp_path, fake):
    truth = 0.3
    results, model = _absent_run(tmp_path, fake, hallucinate=truth, similarity="medium", trials=50)
    absent = _styles(results)["absent"]
    invented = absent.trials - absent.hits
    print(f"\nhallucination reported {absent.hallucination_rate} over {absent.trials} trials (truth {truth})")
    assert absent.trials == 200
    assert abs(absent.hallucination_rate - truth) <= 0.05
    assert not any(o.found for o in model.observations)  # a medium near miss is no lexical match...
    assert invented == sum(o.answered for o in model.observations)  # ...so each made-up answer is counted
    cells = results.prompt("qa").recall.cells
    for c in cells:  # by size and position
        assert c.hallucination_rate == round(1 - c.hits / c.trials, 4)
        assert abs(c.hallucination_rate - truth) <= 0.2, (c.size, c.depth, c.hallucination_rate)
    assert absent.distractor_answers == sum(c.distractor_answers for c in cells) > 0


def test_a_high_similarity_near_miss_fools_a_lexical_matcher(tmp_path, fake):
    results, model = _absent_run(tmp_path, fake, hallucinate=0.0, similarity="high", trials=6)
    absent = _styles(results)["absent"]
    # it takes the near miss (all but one of the question's words) for the answer, at the curve's rate
    assert all(o.found for o in model.observations)
    assert absent.hallucination_rate >= 0.85
    assert absent.distractor_rate >= 0.85
    assert absent.status == "fail"
    assert absent.diagnosis.kind == "hallucination"
    assert "near miss" in absent.diagnosis.summary


ABSTAIN = TEMPLATE.replace(
    "Answer from the notes.", "Answer from the notes. If they do not say, reply: not in the notes."
)


@pytest.mark.slow  # two full-trial runs and a comparison
def test_a_pull_request_that_makes_the_model_invent_answers_fails(tmp_path, fake):
    base, _ = _absent_run(
        tmp_path / "base", fake, hallucinate=0.05, similarity="medium", trials=30, template=ABSTAIN
    )
    # the pull request drops the instruction; the model (here: the fake) starts making answers up
    head, _ = _absent_run(tmp_path / "head", fake, hallucinate=0.6, similarity="medium", trials=30)
    comparison = compare(base, head)
    rc = comparison.prompt("qa").recall
    assert rc.styles == ["absent"]
    assert {g.style for g in rc.groups} == {"absent"}
    assert any(g.verdict == "regressed" for g in rc.groups)
    assert comparison.recall_regressed
    assert comparison.failed
    messages = [f.message for f in comparison.failures]
    assert any("abstention [absent]" in m and "invents answers" in m for m in messages), messages
    # the same run again is no regression
    again = compare(head, head)
    assert not again.recall_regressed


def test_every_cell_names_its_style(tmp_path, fake):
    fake.responder = LexicalModel(flat(P), seed=2, hallucinate=0.2)
    config = write_project(
        tmp_path,
        sizes=(400,),
        depths=(0.0, 1.0),
        trials=3,
        recall_extra='needle = ["codeword", "nonlexical", "absent"]\ndistractors = 1',
    )
    out = tmp_path / "results.json"
    result = CliRunner().invoke(
        main, ["recall", "--config", str(config), "--json", str(out), "--no-progress", "--no-cache"]
    )
    assert result.exit_code in (0, 1), result.output
    for style in ("codeword", "nonlexical", "absent"):  # the terminal heads a grid per style
        assert f"{style} needle" in result.output
    assert "hallucinated" in result.output
    assert "look-alike" in result.output

    data = json.loads(out.read_text())
    recall = data["prompts"][0]["recall"]
    assert [c["style"] for c in recall["cells"]] == ["codeword"] * 2 + ["nonlexical"] * 2 + ["absent"] * 2
    assert [s["style"] for s in recall["styles"]] == ["codeword", "nonlexical", "absent"]
    assert recall["needle_style"] == "codeword+nonlexical+absent"
    assert recall["distractors"] == 1
    assert all(c["hallucination_rate"] is not None for c in recall["cells"] if c["style"] == "absent")

    config_obj = load_config(config)
    results = run_recall(config_obj, overrides=RecallOverrides(), cache=False)
    comment = render_comment(compare(None, results))
    for style in ("codeword", "nonlexical", "absent"):
        assert f"**`{style}`** needle" in comment  # a caption per grid
        assert f"| `{style}`: size \\ depth |" in comment  # the grid names its style
        cells_table = comment.split("Recall cells of", 1)[1].split("</details>", 1)[0]
        rows = [line for line in cells_table.splitlines() if line.startswith(f"| `{style}` | 400 |")]
        assert len(rows) == 2, rows  # every cell of the details table
    assert "hallucination" in comment
    assert "answered a look-alike's value" in comment


def test_probe_runs_are_reproducible(tmp_path, fake):
    fake.responder = LexicalModel(flat(P), seed=4, hallucinate=0.3)
    config = write_project(
        tmp_path,
        sizes=(400,),
        depths=(0.5,),
        trials=4,
        recall_extra='needle = ["nonlexical", "absent"]\nearly_stop = false',
    )
    first, again = run(config), run(config)

    def answers(r):
        return [
            (c.style, a.trial, a.needle, a.answer) for c in r.prompt("qa").recall.cells for a in c.answers
        ]

    assert answers(first) == answers(again)
    assert os.environ["ANTHROPIC_BASE_URL"] == fake.base_url
