"""Malformed configs, templates and fixtures through the real `needle` CLI: exit 2, file:line, no traceback.

Also server-side template injection payloads: refused by the sandbox (or harmless), and a secret in
the environment never shows up in any output.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.builders import Project
from tests.needle_cli import invoke_in as run_cli

REPO = Path(__file__).resolve().parents[2]
SECRET = "sk-ant-xyz-needle-test-secret"

GOOD_TOML = """
[defaults]
model = "claude-sonnet-5-5"

[prompts.rag]
template = "prompts/rag.j2"
fixtures = ["fixtures/rag.yaml"]
"""
GOOD_FILES = {
    "prompts/rag.j2": "system:\nAnswer from the documents.\nuser:\n{% for d in documents %}{{ d }}\n{% endfor %}{{ question }}\n",
    "fixtures/rag.yaml": "documents: [alpha, beta]\nquestion: which?\n",
}


@dataclass
class Case:
    id: str
    where: str  # the "file:line" the output must contain
    toml: str = GOOD_TOML
    files: dict[str, str] = field(default_factory=dict)
    args: tuple[str, ...] = ("render", "rag")
    symlinks: dict[str, str] = field(default_factory=dict)  # link (in repo) -> target (relative to tmp)
    words: str = ""  # a fragment the message must contain


def _t(toml: str) -> str:
    return textwrap.dedent(toml).lstrip("\n")


def _prompty_case(case_id: str, line: int, text: str) -> Case:
    """A case whose one prompt is ``prompts/s.prompty`` holding TEXT, its error expected at LINE."""
    return Case(
        case_id,
        f"prompts/s.prompty:{line}",
        _t('[prompts.rag]\ntemplate = "prompts/s.prompty"\n'),
        files={"prompts/s.prompty": text},
    )


# a table of cases: rows of the same form (`duplicates` pairs them), one mistake each
CASES = [
    # ---- the threshold file
    Case("toml-syntax", "needle.toml:2", _t("[prompts.rag]\ntemplate = \n"), words="TOML syntax"),
    Case(
        "toml-unterminated-string",
        "needle.toml:3",
        _t('[prompts.rag]\ntemplate = "prompts/rag.j2"\nmodel = "x\n'),
    ),
    Case(
        "toml-duplicate-table",
        "needle.toml:5",
        _t('[prompts.rag]\ntemplate = "prompts/rag.j2"\n\n# again\n[prompts.rag]\nmodel = "x"\n'),
    ),
    Case(
        "unknown-key-prompt",
        "needle.toml:3",
        _t('[prompts.rag]\ntemplate = "prompts/rag.j2"\ntemplat = "x"\n'),
        words="did you mean 'template'",
    ),
    Case(
        "unknown-key-defaults-recall",
        "needle.toml:3",
        _t('[defaults.recall]\nsizes = [2000]\ndepth = [0.5]\n[prompts.rag]\ntemplate = "prompts/rag.j2"\n'),
        words="did you mean 'depths'",
    ),
    Case(
        "unknown-top-level-table",
        "needle.toml:1",
        _t('[default]\nmodel = "x"\n[prompts.rag]\ntemplate = "prompts/rag.j2"\n'),
        words="[defaults]",
    ),
    Case(
        "wrong-type",
        "needle.toml:3",
        _t('[prompts.rag]\ntemplate = "prompts/rag.j2"\nmax_input_tokens = "many"\n'),
    ),
    Case(
        "bad-growth",
        "needle.toml:2",
        _t('[defaults]\nmax_growth = "ten"\n[prompts.rag]\ntemplate = "prompts/rag.j2"\n'),
    ),
    Case(
        "bad-tokenizer",
        "needle.toml:3",
        _t('[prompts.rag]\ntemplate = "prompts/rag.j2"\ntokenizer = "gpt2"\n'),
    ),
    Case(
        "unknown-tiktoken-encoding",
        "needle.toml:3",
        _t('[prompts.rag]\ntemplate = "prompts/rag.j2"\ntokenizer = "tiktoken:p50k_base"\n'),
    ),
    Case(
        "bad-provider-literal",
        "needle.toml:3",
        _t('[prompts.rag]\ntemplate = "prompts/rag.j2"\nprovider = "watsonx"\n'),
    ),
    Case(
        "depth-out-of-range-inherited",
        "needle.toml:2",
        _t('[defaults.recall]\ndepths = [0.5, 2]\n\n[prompts.rag]\ntemplate = "prompts/rag.j2"\n'),
    ),
    Case(
        "threshold-too-high",
        "needle.toml:5",
        _t('[prompts.rag]\ntemplate = "prompts/rag.j2"\n\n[prompts.rag.recall]\nthreshold = 1.5\n'),
    ),
    Case(
        "regex-scoring-without-regex",
        "needle.toml:4",
        _t('[prompts.rag]\ntemplate = "prompts/rag.j2"\n\n[prompts.rag.recall]\nscoring = "regex"\n'),
    ),
    Case(
        "custom-needle-missing-question",
        "needle.toml:1",
        _t('[[defaults.recall.needles]]\nfact = "x"\n\n[prompts.rag]\ntemplate = "prompts/rag.j2"\n'),
    ),
    Case(
        "unknown-provider-table",
        "needle.toml:1",
        _t(
            '[defaults.providers.openia]\nbase_url = "http://x"\n[prompts.rag]\ntemplate = "prompts/rag.j2"\n'
        ),
    ),
    Case(
        "template-in-defaults",
        "needle.toml:2",
        _t('[defaults]\ntemplate = "t.j2"\n[prompts.rag]\ntemplate = "prompts/rag.j2"\n'),
    ),
    Case("no-prompts", "needle.toml:1", _t('[defaults]\nmodel = "x"\n'), words="no prompts"),
    Case("prompt-without-template", "needle.toml:1", _t('[prompts.rag]\nmodel = "x"\n'), words="template"),
    Case(
        "template-missing",
        "needle.toml:2",
        _t('[prompts.rag]\ntemplate = "prompts/rga.j2"\n'),
        words="not found",
    ),
    Case(
        "template-absolute",
        "needle.toml:2",
        _t('[prompts.rag]\ntemplate = "/etc/passwd"\n'),
        words="absolute",
    ),
    Case("template-dotdot", "needle.toml:2", _t('[prompts.rag]\ntemplate = "../outside.j2"\n'), words=".."),
    Case(
        "template-symlink-escape",
        "needle.toml:2",
        _t('[prompts.rag]\ntemplate = "prompts/link.j2"\n'),
        symlinks={"prompts/link.j2": "outside.j2"},
        words="symlink",
    ),
    Case(
        "fixture-missing",
        "needle.toml:5",
        _t(
            '[prompts.rag]\ntemplate = "prompts/rag.j2"\nfixtures = [\n  "fixtures/rag.yaml",\n  "fixtures/nope.yaml",\n]\n'
        ),
    ),
    Case(
        "fixture-glob-empty",
        "needle.toml:3",
        _t('[prompts.rag]\ntemplate = "prompts/rag.j2"\nfixtures = ["fixtures/*.json"]\n'),
        words="matches no files",
    ),
    Case(
        "fixture-duplicate",
        "needle.toml:3",
        _t(
            '[prompts.rag]\ntemplate = "prompts/rag.j2"\nfixtures = ["fixtures/*.yaml", "fixtures/rag.yaml"]\n'
        ),
        words="twice",
    ),
    Case(
        "fixture-dotdot",
        "needle.toml:3",
        _t('[prompts.rag]\ntemplate = "prompts/rag.j2"\nfixtures = ["../secrets.yaml"]\n'),
        words="..",
    ),
    Case(
        "fixture-wrong-extension",
        "needle.toml:3",
        _t('[prompts.rag]\ntemplate = "prompts/rag.j2"\nfixtures = ["fixtures/rag.txt"]\n'),
        files={"fixtures/rag.txt": "x"},
        words="extension",
    ),
    Case("bad-prompt-name", "needle.toml:1", _t('[prompts."rag answer"]\ntemplate = "prompts/rag.j2"\n')),
    # ---- templates
    Case(
        "template-syntax",
        "prompts/rag.j2:3",
        files={"prompts/rag.j2": "system:\nok\n{% for d in %}\n"},
        words="syntax",
    ),
    Case(
        "template-unclosed-block", "prompts/rag.j2:2", files={"prompts/rag.j2": "a\n{% if question %}\nb\n"}
    ),
    Case(
        "template-undefined",
        "prompts/rag.j2:4",
        files={"prompts/rag.j2": "system:\nx\nuser:\n{{ questoin }}\n"},
        words="questoin",
    ),
    Case(
        "template-undefined-attribute",
        "prompts/rag.j2:2",
        files={"prompts/rag.j2": "x\n{{ documents.first.title }}\n"},
    ),
    Case(
        "include-missing",
        "prompts/rag.j2:2",
        files={"prompts/rag.j2": "x\n{% include 'partials/none.j2' %}\n"},
        words="not found",
    ),
    Case(
        "include-syntax-error",
        "prompts/partials/p.j2:2",
        files={"prompts/rag.j2": "{% include 'partials/p.j2' %}", "prompts/partials/p.j2": "ok\n{{ x + }}\n"},
    ),
    Case(
        "include-undefined",
        "prompts/partials/p.j2:3",
        files={
            "prompts/rag.j2": "a\n{% include 'partials/p.j2' %}",
            "prompts/partials/p.j2": "1\n2\n{{ nope }}\n",
        },
    ),
    Case("template-runtime-error", "prompts/rag.j2:2", files={"prompts/rag.j2": "x\n{{ 1 / 0 }}\n"}),
    Case(
        "template-two-systems",
        "prompts/rag.j2:5",
        files={"prompts/rag.j2": "system:\na\nuser:\nb\nsystem:\nc\n"},
        words="more than one system",
    ),
    Case("template-not-utf8", "prompts/rag.j2:2", files={"prompts/rag.j2": "ok\n\udcff bad\n"}),
    _prompty_case("prompty-front-matter-yaml", 3, "---\nname: s\nsample: {a: [1, 2}\n---\nuser:\nhi\n"),
    _prompty_case("prompty-unclosed-front-matter", 1, "---\nname: s\nhi\n"),
    _prompty_case(
        "prompty-body-undefined", 7, "---\nname: s\nsample:\n  q: x\n---\nuser:\n{{ q }} {{ missing.attr }}\n"
    ),
    # ---- fixtures
    Case(
        "fixture-yaml-syntax",
        "fixtures/rag.yaml:3",
        files={"fixtures/rag.yaml": "documents:\n  - a\n question: [b\n"},
    ),
    Case(
        "fixture-json-syntax",
        "fixtures/rag.json:4",
        _t('[prompts.rag]\ntemplate = "prompts/rag.j2"\nfixtures = ["fixtures/rag.json"]\n'),
        files={"fixtures/rag.json": '{\n  "documents": ["a"],\n  "question": "x",\n}\n'},
    ),
    Case(
        "fixture-toml-syntax",
        "fixtures/rag.toml:2",
        _t('[prompts.rag]\ntemplate = "prompts/rag.j2"\nfixtures = ["fixtures/rag.toml"]\n'),
        files={"fixtures/rag.toml": 'question = "x"\ndocuments = [\n'.rstrip("\n") + "\n\n"},
    ),
    Case(
        "fixture-top-level-list",
        "fixtures/rag.yaml:1",
        files={"fixtures/rag.yaml": "- a\n- b\n"},
        words="mapping",
    ),
]


def build(tmp_path: Path, case: Case) -> Path:
    """tmp/repo holds the case's project; next to it, outside its root, two files with the secret."""
    outside = Project(tmp_path).file("outside.j2", f"outside the root: {SECRET}\n")
    outside.file("secrets.yaml", f"question: {SECRET}\n")
    repo = Project(tmp_path / "repo").files({**GOOD_FILES, **case.files})
    for link, target in case.symlinks.items():
        repo.link(link, tmp_path / target)
    return repo.config(case.toml, dedent=False).root


def test_at_least_25_malformed_inputs():
    assert len(CASES) >= 25
    assert len({c.id for c in CASES}) == len(CASES)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_malformed_input_exits_2_with_file_line(tmp_path, monkeypatch, case):
    monkeypatch.setenv("NEEDLE_TEST_SECRET", SECRET)
    repo = build(tmp_path, case)
    result = run_cli(repo, *case.args)
    out = result.output
    assert result.exit_code == 2, out
    assert isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in out
    assert f"error: {case.where}:" in out or f"error: {case.where}: " in out, out
    if case.words:
        assert case.words in out, out
    assert SECRET not in out


def test_missing_config_suggests_init(tmp_path):
    result = run_cli(tmp_path, "render", "rag")
    assert result.exit_code == 2
    assert "needle.toml: threshold file not found" in result.output
    assert "needle init" in result.output


def test_unknown_prompt_name_and_fixture_outside(tmp_path):
    repo = build(tmp_path, Case("ok", ""))
    result = run_cli(repo, "render", "nope")
    assert result.exit_code == 2
    assert "rag" in result.output
    result = run_cli(repo, "render", "rag", "--fixture", "../secrets.yaml")
    assert result.exit_code == 2
    assert "outside the config root" in result.output
    assert SECRET not in result.output
    assert "Traceback" not in result.output


def test_good_config_renders(tmp_path):
    repo = build(tmp_path, Case("ok", ""))
    result = run_cli(repo, "render", "rag")
    assert result.exit_code == 0, result.output
    assert "--- system ---\nAnswer from the documents.\n--- user ---\nalpha\nbeta\nwhich?\n" in result.output


def test_real_process_no_traceback(tmp_path):
    """The same path through a real `python -m needle_action` process (no CliRunner in between)."""
    repo = build(tmp_path, CASES[0])
    env = {**os.environ, "NEEDLE_TEST_SECRET": SECRET, "PYTHONPATH": str(REPO)}
    proc = subprocess.run(
        [sys.executable, "-m", "needle_action", "render", "rag", "--config", "needle.toml"],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert proc.stderr.startswith("error: needle.toml:2:")
    assert "Traceback" not in proc.stderr + proc.stdout


# ---------------------------------------------------------------- template injection


PAYLOADS = [
    "{{ ''.__class__.__mro__[1].__subclasses__() }}",
    "{{ ''.__class__.__base__.__subclasses__()[0] }}",
    "{{ cycler.__init__.__globals__.os.environ }}",
    "{{ cycler.__init__.__globals__.os.environ['NEEDLE_TEST_SECRET'] }}",
    "{{ joiner.__init__.__globals__ }}",
    "{{ lipsum.__globals__ }}",
    "{{ lipsum.__globals__['os'].environ }}",
    "{{ self.__init__.__globals__ }}",
    "{{ self._TemplateReference__context }}",
    "{{ namespace.__init__.__globals__ }}",
    "{{ range.__globals__ }}",
    "{{ dict.__base__.__subclasses__() }}",
    "{{ config }}",
    "{{ config.__class__.__init__.__globals__['os'].environ }}",
    "{{ request }}",
    "{{ request.application.__globals__.__builtins__.__import__('os').popen('env').read() }}",
    "{{ '{0.__class__}'.format(question) }}",
    "{{ '{0.__init__.__globals__}'.format(cycler) }}",
    "{{ '%s' % question.__class__ }}",
    "{{ cycler|attr('__init__')|attr('__globals__') }}",
    "{{ (cycler|attr('__init__')|attr('__globals__'))['os'].environ }}",
    "{{ question|attr('\\x5f\\x5fclass\\x5f\\x5f') }}",
    "{{ documents.__class__.__mro__ }}",
    "{% for c in [].__class__.__base__.__subclasses__() %}{{ c }}{% endfor %}",
    "{% include '/etc/passwd' %}",
    "{% include '../outside.j2' %}",
    "{% include 'prompts/link.j2' %}",
    "{% import '../outside.j2' as o %}",
    "{% extends '/proc/self/environ' %}",
    "{% include '/proc/self/environ' %}",
    "{{ documents.pop() }}",
    "{{ 'x' * 999999999 }}",
]


@pytest.mark.parametrize("payload", PAYLOADS)
def test_injection_payloads_are_refused_and_leak_nothing(tmp_path, monkeypatch, payload):
    monkeypatch.setenv("NEEDLE_TEST_SECRET", SECRET)
    case = Case(
        "ssti",
        "",
        files={"prompts/rag.j2": "system:\nhello\nuser:\n" + payload + "\n{{ question }}\n"},
        symlinks={"prompts/link.j2": "outside.j2"},
    )
    repo = build(tmp_path, case)
    result = run_cli(repo, "render", "rag")
    out = result.output
    assert SECRET not in out
    assert "Traceback" not in out
    assert "PATH=" not in out
    assert "root:x:0:0" not in out
    assert result.exit_code == 2, out
    assert "prompts/rag.j2:4" in out, out


def test_secret_references_in_fixtures_and_prompty_stay_literal(tmp_path, monkeypatch):
    monkeypatch.setenv("NEEDLE_TEST_SECRET", SECRET)
    case = Case(
        "env-refs",
        "",
        _t('[prompts.rag]\ntemplate = "prompts/s.prompty"\nfixtures = ["fixtures/rag.yaml"]\n'),
        files={
            "prompts/s.prompty": "---\nname: s\nmodel:\n  configuration:\n    api_key: ${env:NEEDLE_TEST_SECRET}\n"
            "sample:\n  extra: ${env:NEEDLE_TEST_SECRET}\n---\nsystem:\n{{ extra }}\nuser:\n{{ question }}\n",
            "fixtures/rag.yaml": "question: $NEEDLE_TEST_SECRET and ${NEEDLE_TEST_SECRET}\n",
        },
    )
    repo = build(tmp_path, case)
    result = run_cli(repo, "render", "rag", "--format", "json")
    assert result.exit_code == 0, result.output
    assert SECRET not in result.output
    assert "${env:NEEDLE_TEST_SECRET}" in result.output
    assert "$NEEDLE_TEST_SECRET and" in result.output
