"""needle init lists the repository once: one os.walk, which every finder (templates, fixtures,
Semantic Kernel prompts, Python files) filters by its own rules, and the same starter as the four
walks it replaced wrote."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from needle_action.cli import main
from needle_action.config.loader import FIXTURE_SUFFIXES
from needle_action.core.paths import is_inside
from needle_action.scaffold import code
from needle_action.scaffold.templates import TEMPLATE_SUFFIXES, walk
from needle_action.scaffold.tree import Tree
from tests.builders import Project

AGENT = """import anthropic

client = anthropic.Anthropic()


def reply(question: str, notes: str) -> str:
    answer = client.messages.create(
        model="claude-sonnet-4-5",
        max_tokens=600,
        messages=[{"role": "user", "content": notes + "\\n\\n" + question}],
    )
    return answer.content[0].text
"""

# a template with a fixture and a partial, an skprompt.txt, an SK *.prompt (given a builder stub),
# a Python file calling an SDK; and what each finder skips: build/ (code only), dist/ (code only),
# node_modules/, a hidden folder, a symlinked .py file (code only) and a symlinked folder
FILES = {
    "prompts/answer.j2": "system:\n{% include 'partials/rules.j2' %}\nuser:\n"
    "{% for d in documents %}{{ d }}\n{% endfor %}{{ question }}\n",
    "prompts/partials/rules.j2": "Be brief.",
    "fixtures/answer/typical.yaml": "documents: [a, b]\nquestion: q\n",
    "plugins/Harbour/Answer/skprompt.txt": "Notes: {{$notes}}\nQuestion: {{$question}}\n",
    "plugins/Harbour/Answer/config.json": "{}",
    "plugins/Greeter.prompt": "Hello {{$name}}. Answer: {{$question}}\n",
    "app/agent.py": AGENT,
    "build/late.j2": "{{ question }}",
    "dist/agent.py": AGENT,
    "node_modules/pkg/ignored.j2": "{{ x }}",
    ".hidden/ignored.j2": "{{ x }}",
    "README.md": "an app",
}
LINKS = {"app/link.py": "agent.py", "linked": "prompts"}

# What `needle init` wrote on this tree before it listed the tree once (four os.walk calls), from
# the [defaults.recall] table on: the part the tree decides (the header is the defaults').
EXPECTED_PROMPTS = r"""
# Partials (included by other templates, so not prompts of their own):
#   prompts/partials/rules.j2

[prompts.late]
template = "build/late.j2"
# NOTE: the template only prints {{ question }}: the prompt's text is written in code, so it has no question slot of its own; measure the code that builds it with a builder (`builder = "file.py:function"`) or a recorded request (`request = "x.json"`)
# variables the template reads: question
# fixtures = ["fixtures/late.yaml"]   # YAML/JSON/TOML files (or .jsonl/.csv datasets) with the variables above
# context_var = "documents"   # the variable holding retrieved text / history
# question_var = "question"   # the variable holding the user's question
# max_input_tokens = 8000
# max_growth = "10%"
[prompts.late.recall]
enabled = false   # turn on once fixtures, context_var and question_var are set

[prompts.answer]
template = "plugins/Harbour/Answer/skprompt.txt"
# variables the template reads: notes, question
fixtures = ["fixtures/answer.yaml"]   # each fixture is one case
context_var = "notes"   # the haystack slot recall fills
question_var = "question"   # the slot recall puts its question in
# max_input_tokens = 2000   # suggestion: ~1.5x this prompt's current size plus the reserve
# max_growth = "10%"

[prompts.prompts_answer]
template = "prompts/answer.j2"
# variables the template reads: documents, question
fixtures = ["fixtures/answer/typical.yaml"]   # each fixture is one case
context_var = "documents"   # the haystack slot recall fills
question_var = "question"   # the slot recall puts its question in
# max_input_tokens = 2000   # suggestion: ~1.5x this prompt's current size plus the reserve
# max_growth = "10%"

[prompts.greeter]
# built in code: plugins/Greeter.prompt: a Semantic Kernel YAML prompt file (its prompt: holds SK syntax), not Dotprompt
# needle_builders/greeter.py (written by needle init: edit it until it returns what the app sends)
builder = "needle_builders/greeter.py:build"
fixtures = ["needle_builders/greeter.yaml"]   # each fixture is one case: the builder's keyword arguments
# variables: name, question
# context_var = "..."   # the haystack slot recall fills
question_var = "question"   # the slot recall puts its question in
# max_input_tokens = 8000
[prompts.greeter.recall]
enabled = false   # turn on once context_var and question_var are set

# Requests built in code, not configured here (a builder measures each: docs/config.md):
#   app/agent.py:7 (anthropic) client.messages.create( model="claude-sonnet-4-5", max_tokens=600, messages=[{"role": "user", "content": notes + "\n\n" + question}], )

# Builders run this repository's Python: in a worker with no network and no secrets (as user
# nobody under root), with the project's .venv/venv when there is one (or builder_python).
# In the GitHub Action only the base branch's [files] counts (docs/security.md).
[files]
builders = true
# builder_python = ".venv/bin/python"   # a Python that can import the app's packages
"""
WRITTEN = [
    "fixtures/answer.yaml",
    "needle.toml",
    "needle_builders/greeter.py",
    "needle_builders/greeter.yaml",
]


def _tree(root: Path) -> None:
    Project(root).files(FILES)
    for rel, target in LINKS.items():
        Project(root).link(rel, Path(target))


def test_init_walks_the_tree_once_and_writes_the_starter_the_four_walks_wrote(tmp_path, monkeypatch):
    _tree(tmp_path)
    before = {p for p in tmp_path.rglob("*") if p.is_file()}
    walks: list[object] = []
    real_walk = os.walk

    def counted(top, *args, **kwargs):
        walks.append(top)
        return real_walk(top, *args, **kwargs)

    monkeypatch.setattr(os, "walk", counted)
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["init"])
    assert result.exit_code == 0, result.output
    assert len(walks) == 1, walks
    text = (tmp_path / "needle.toml").read_text(encoding="utf-8")
    assert text.split("filler text from the repository\n", 1)[1] == EXPECTED_PROMPTS
    written = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*") if p.is_file())
    assert sorted(set(written) - {p.relative_to(tmp_path).as_posix() for p in before}) == WRITTEN


# The walks the listing replaced, as they were written (scaffold/templates.py and scaffold/code.py):
# the reference every filter of the listing must agree with.
OLD_SKIP_DIRS = {"venv", "node_modules", "__pycache__", "site-packages"}
OLD_CODE_SKIP_DIRS = {"venv", "node_modules", "__pycache__", "site-packages", "build", "dist"}


def old_walk(root: Path, suffixes: tuple[str, ...]) -> list[Path]:
    out: list[Path] = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in OLD_SKIP_DIRS and not d.startswith("."))
        for f in sorted(files):
            p = Path(folder) / f
            if p.suffix.lower() in suffixes and p.is_file() and is_inside(root, p):
                out.append(p)
    return out


def old_python_files(root: Path, max_files: int) -> list[Path]:
    out: list[Path] = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in OLD_CODE_SKIP_DIRS and not d.startswith("."))
        for f in sorted(files):
            p = Path(folder) / f
            if f.endswith(".py") and not p.is_symlink() and p.is_file() and is_inside(root, p):
                out.append(p)
                if len(out) >= max_files:
                    return out
    return out


def _awkward_tree(root: Path) -> None:
    """Files each rule is about: nested build/ and dist/, hidden and skipped folders, upper-case
    suffixes, symlinked files and folders, a broken link, a link loop, a link out of the root."""
    names = ["a.py", "b.py", "UP.PY", "t.J2", "t.j2", "f.yaml", "skprompt.txt", "x.prompt", "n.txt"]
    for folder in ["", "src", "src/build", "src/deep/dist", "build", ".cache", "venv", "zz/b", "zz/a"]:
        for name in names:
            Project(root).file(f"{folder}/{name}".lstrip("/"), "x")
    project = Project(root)
    project.link("src/link.py", Path("a.py")).link("src/link.j2", Path("t.j2"))
    project.link("src/folder_link", Path("../zz")).link("src/broken.j2", Path("gone.j2"))
    project.link("src/loop.j2", Path("loop.j2")).link("src/out.j2", root.parent / "outside.j2")
    (root.parent / "outside.j2").write_text("x")


@pytest.mark.parametrize(
    "suffixes", [TEMPLATE_SUFFIXES, FIXTURE_SUFFIXES, (".txt", ".yaml", ".yml", ".prompt")]
)
def test_the_listing_finds_what_each_walk_found_in_its_order(tmp_path, suffixes):
    root = tmp_path / "repo"
    _awkward_tree(root)
    expected = old_walk(root, suffixes)
    assert expected  # the tree holds such files
    assert walk(root, suffixes, Tree.walk(root)) == expected
    assert walk(root, suffixes) == expected  # a caller with no listing of its own


@pytest.mark.parametrize("cap", [1, 4, 7, 10_000])
def test_python_files_skip_links_build_output_and_stop_at_the_cap_as_before(tmp_path, monkeypatch, cap):
    root = tmp_path / "repo"
    _awkward_tree(root)
    monkeypatch.setattr(code, "MAX_FILES", cap)
    expected = old_python_files(root, cap)
    assert len(expected) == min(cap, 8)  # a.py and b.py in the root, src/, zz/a/ and zz/b/
    assert code.python_files(root, Tree.walk(root)) == expected
    assert code.python_files(root) == expected


def test_a_listing_of_another_folder_is_refused(tmp_path):
    (tmp_path / "a").mkdir()
    with pytest.raises(ValueError, match="the listing is of"):
        walk(tmp_path, TEMPLATE_SUFFIXES, Tree.walk(tmp_path / "a"))
