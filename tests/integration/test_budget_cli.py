"""`needle budget` end to end on the bundled examples: pass, a tightened budget, growth vs a baseline."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

import needle_action.tokens as tokens
from needle_action.cli import main
from needle_action.results import SCHEMA_VERSION, load_results
from tests.builders import Project
from tests.needle_cli import run_needle

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"


def _has_llama() -> bool:
    try:
        import llama_cpp  # noqa: F401
    except ImportError:
        return False
    return True


@pytest.fixture(autouse=True)
def fresh_cache():
    tokens.clear_cache()
    yield
    tokens.clear_cache()


@pytest.fixture
def examples(tmp_path) -> Path:
    """A private copy of examples/ counted with tiktoken (so these tests need no local model)."""
    project = Project(tmp_path / "examples").examples()
    return project.edit("needle.toml", 'tokenizer = "local"', 'tokenizer = "tiktoken:o200k_base"').root


def budget(*args: str):
    return CliRunner().invoke(main, ["budget", *args])


@pytest.mark.model  # examples/needle.toml counts with the embedded model's tokenizer
@pytest.mark.skipif(not _has_llama(), reason="llama-cpp-python is not installed (the [local] extra)")
def test_bundled_examples_pass_as_shipped(tmp_path):
    """The README's command, as a user runs it: a real process on the untouched examples/."""
    out = tmp_path / "results.json"
    proc = run_needle(["budget", "--config", str(EXAMPLES / "needle.toml"), "--json", str(out)])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    results = load_results(out)
    cases = [c for p in results.prompts for c in p.cases]
    # 8 template cases, the builder's and the recorded request's
    assert len(cases) == 10
    assert all(c.status == "pass" for c in cases)
    assert all(c.count.counter == "local:gemma3-270m" and c.count.exact for c in cases)
    assert "budget PASS" in proc.stdout


def test_examples_pass_and_json_is_a_valid_results_file(examples, tmp_path):
    out = tmp_path / "out" / "results.json"
    result = budget("--config", str(examples / "needle.toml"), "--json", str(out))
    assert result.exit_code == 0, result.output
    for name in (
        "rag_answer",
        "support_agent",
        "summarize_ticket",
        "typical.yaml",
        "worst.json",
        "long.yaml",
        "trip_planner",
        "porto-guest.json",
    ):
        assert name in result.output
    assert "budget PASS: 10 cases in 6 prompts, 10 passed, 0 failed" in result.output

    raw = json.loads(out.read_text())
    assert raw["schema_version"] == SCHEMA_VERSION
    results = load_results(out)  # the reader the later stages use
    assert [p.name for p in results.prompts] == [
        "rag_answer",
        "support_agent",
        "summarize_ticket",
        "trip_planner",
        "support_built",  # built in code (agent/support.py)
        "triage",  # a recorded request
    ]
    for p in results.prompts:
        assert len(p.cases) == (1 if p.name in ("support_built", "triage") else 2)
        for c in p.cases:
            assert c.status == "pass"
            assert c.reasons == []
            assert c.headroom == c.max_input_tokens - c.count.tokens - c.reserve_output_tokens
            assert c.headroom > 0
            assert len(c.content_hash) == 64
            assert c.count.counter == "tiktoken:o200k_base"
            assert c.count.exact is False
    # the worst case is bigger than the typical one for every prompt
    for p in results.prompts:
        if len(p.cases) == 2:
            assert p.cases[1].count.tokens > p.cases[0].count.tokens
    # recall never ran: the budget file says so by leaving it empty
    assert all(p.recall is None for p in results.prompts)


def test_tightened_budget_exits_1_with_the_reason(examples, tmp_path):
    cfg = examples / "needle.toml"
    cfg.write_text(cfg.read_text().replace("max_input_tokens = 4000", "max_input_tokens = 2000"))
    out = tmp_path / "r.json"
    result = budget("--config", str(cfg), "--json", str(out))
    assert result.exit_code == 1, result.output
    results = load_results(out)
    rag = results.prompt("rag_answer")
    typical, worst = rag.cases
    assert typical.status == "pass"
    assert worst.status == "fail"
    over = worst.count.tokens + worst.reserve_output_tokens - 2000
    assert worst.headroom == -over
    expected = f"{worst.count.tokens:,} + 512 reserved > 2,000 budget by {over:,} tokens"
    assert worst.reasons == [expected]
    assert expected in result.output
    assert "FAIL" in result.output
    assert "1 failed" in result.output
    assert results.budget_status == "fail"


def test_growth_against_a_baseline_exits_1(examples, tmp_path):
    cfg = examples / "needle.toml"
    base = tmp_path / "base.json"
    assert budget("--config", str(cfg), "--json", str(base)).exit_code == 0

    # unchanged head: zero growth, passes, deltas shown
    same = budget("--config", str(cfg), "--baseline", str(base))
    assert same.exit_code == 0, same.output
    assert "+0 (+0.0%)" in same.output

    # the PR pads the typical RAG case with four more retrieved documents: > 10% growth
    fx = examples / "fixtures" / "rag_answer" / "typical.yaml"
    data = yaml.safe_load(fx.read_text())
    data["documents"] += data["documents"][:4]
    fx.write_text(yaml.safe_dump(data, sort_keys=False))
    head = tmp_path / "head.json"
    grown = budget("--config", str(cfg), "--baseline", str(base), "--json", str(head))
    assert grown.exit_code == 1, grown.output

    base_r, head_r = load_results(base), load_results(head)
    b, h = base_r.prompt("rag_answer").cases[0], head_r.prompt("rag_answer").cases[0]
    assert h.status == "fail"
    assert h.baseline_tokens == b.count.tokens
    assert h.growth_tokens == h.count.tokens - b.count.tokens > 0
    pct = 100 * h.growth_tokens / b.count.tokens
    assert pct > 10
    assert h.reasons == [f"grew {pct:.1f}% vs base (limit 10%)"]
    assert h.reasons[0] in grown.output
    # every other case is unchanged and still passes
    others = [c for p in head_r.prompts for c in p.cases if c is not h]
    assert all(c.status == "pass" and c.growth_tokens == 0 for c in others)


def test_absolute_growth_limit_and_a_new_prompt(examples, tmp_path):
    cfg = examples / "needle.toml"
    base = tmp_path / "base.json"
    assert budget("--config", str(cfg), "--prompt", "rag_answer", "--json", str(base)).exit_code == 0
    cfg.write_text(cfg.read_text().replace('max_growth = "10%"', "max_growth = 5"))
    tpl = examples / "prompts" / "rag_answer.j2"
    tpl.write_text(
        tpl.read_text().replace(
            "Question: {{ question }}", "Question (answer carefully, in English): {{ question }}"
        )
    )
    out = tmp_path / "head.json"
    result = budget("--config", str(cfg), "--baseline", str(base), "--json", str(out))
    assert result.exit_code == 1, result.output
    head = load_results(out)
    for c in head.prompt("rag_answer").cases:
        assert c.status == "fail"
        assert 5 < c.growth_tokens < 20
        assert c.reasons == [f"grew {c.growth_tokens} tokens vs base (limit 5 tokens)"]
    # prompts the base never measured are new: no growth check, shown as "new"
    for c in head.prompt("support_agent").cases:
        assert c.status == "pass"
        assert c.baseline_tokens is None
    assert "new" in result.output


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "not valid JSON"),
        ('{"prompts": []}', "no schema_version"),
        ('{"schema_version": 999, "config": "x"}', "schema_version 999"),
    ],
)
def test_bad_baseline_file_exits_2(examples, tmp_path, content, message):
    bad = tmp_path / "base.json"
    bad.write_text(content)
    result = budget("--config", str(examples / "needle.toml"), "--baseline", str(bad))
    assert result.exit_code == 2
    assert message in result.output
    assert "Traceback" not in result.output


def test_unwritable_output_paths_exit_2_without_a_traceback(examples, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    result = budget("--config", str(examples / "needle.toml"), "--json", str(blocker / "out.json"))
    assert result.exit_code == 2, result.output
    assert "cannot write" in result.output
    assert isinstance(result.exception, SystemExit)

    head = tmp_path / "head.json"
    assert budget("--config", str(examples / "needle.toml"), "--json", str(head)).exit_code == 0
    result = CliRunner().invoke(main, ["report", str(head), "-o", str(blocker / "c.md")])
    assert result.exit_code == 2, result.output
    assert "cannot write" in result.output
    assert isinstance(result.exception, SystemExit)


def test_missing_baseline_file_exits_2(examples, tmp_path):
    result = budget("--config", str(examples / "needle.toml"), "--baseline", str(tmp_path / "nope.json"))
    assert result.exit_code == 2
    assert "results file not found" in result.output


@pytest.mark.slow  # a real `needle check` that starts the embedded model's load (~3 s idle)
def test_a_bad_recall_setting_is_reported_after_the_budget_table(examples):
    """`needle check` starts the embedded model's load before the budgets; that head start never
    reports a setting itself: the budget table comes first, then the recall stage's clear error."""
    r = run_needle(["check", "--config", str(examples / "needle.toml"), "--no-cache", "--trials", "0"])
    assert r.returncode == 2, r.stderr
    assert "budget PASS" in r.stdout
    assert "\nerror: --trials must be at least 1\n" in "\n" + r.stderr, r.stderr
    assert "Traceback" not in r.stderr


def test_fixtures_whose_keys_the_template_never_reads_are_named(tmp_path):
    """Three fixtures written for `query` against a template that reads `question` (with a default,
    as a `.prompty`'s sample gives one): one request three times. The table would show three passing rows for one test; the later two say so, in the
    terminal and in the results file. A fixture that does change the request is not named."""
    project = Project(tmp_path).template(
        "prompts/ask.j2", 'Answer briefly.\nQuestion: {{ question | default("When is breakfast?") }}\n'
    )
    for name, query in (
        ("first", "When does the pool open?"),
        ("second", "Is there parking?"),
        ("third", "Wifi?"),
    ):
        project.fixture(f"fixtures/{name}.yaml", {"query": query})
    project.fixture("fixtures/real.yaml", {"question": "Where is the sauna?"})
    project.config(
        """
        [defaults]
        tokenizer = "tiktoken:o200k_base"
        [prompts.ask]
        template = "prompts/ask.j2"
        fixtures = ["fixtures/first.yaml", "fixtures/second.yaml", "fixtures/real.yaml", "fixtures/third.yaml"]
        """
    )
    out = tmp_path / "results.json"
    result = budget("--config", str(project.config_path), "--json", str(out))
    assert result.exit_code == 0, result.output
    repeats = {c.fixture: c.same_request_as for c in load_results(out).prompt("ask").cases}
    assert repeats == {
        "fixtures/first.yaml": None,
        "fixtures/second.yaml": "fixtures/first.yaml",
        "fixtures/real.yaml": None,
        "fixtures/third.yaml": "fixtures/first.yaml",
    }
    assert result.output.count("the same request as [first.yaml]") == 2
    assert "ask [second.yaml]: the same request as [first.yaml]" in result.output
    assert "ask [real.yaml]: the same" not in result.output
