"""The architecture holds itself: the layer contracts in ``.importlinter`` really run (``lint-imports``
from the [dev] extra; a missing tool is a failure, not a skip), pass on the repository, and fail on a
copy of the package into which a forbidden import was written, so a green result means "checked and
clean", never "nothing ran". And no two modules import each other, even through a chain.

``python3 tests/integration/test_architecture.py`` prints the import cycles among ``needle_action``'s
modules (exit 1 when there is one).
"""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CONTRACTS = REPO / ".importlinter"
PACKAGE = "needle_action"


def lint_imports(root: Path) -> subprocess.CompletedProcess:
    """``lint-imports`` with our contracts over the ``needle_action`` found in ROOT (first on the path,
    so this checkout's copy is analysed, not an installed one)."""
    exe = shutil.which("lint-imports") or shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    if not exe:
        pytest.fail(
            "lint-imports is not installed: pip install -e '.[dev]' (import-linter is in the dev extra)"
        )
    path = os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")])
    env = {**os.environ, "COLUMNS": "200", "PYTHONPATH": path}  # wide: no violation wraps
    return subprocess.run(
        [exe, "--no-cache", "--no-logo", str(CONTRACTS)],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )


def report(proc: subprocess.CompletedProcess) -> str:
    return f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"


def test_the_contracts_hold_on_the_repository():
    proc = lint_imports(REPO)
    assert proc.returncode == 0, report(proc)
    assert "0 broken" in proc.stdout, report(proc)


@pytest.fixture
def package_copy(tmp_path: Path) -> Path:
    """A copy of the package (sources only) in a fresh root, to break on purpose."""
    shutil.copytree(
        REPO / "needle_action", tmp_path / "needle_action", ignore=shutil.ignore_patterns("__pycache__")
    )
    return tmp_path


def add_line(path: Path, line: str) -> None:
    path.write_text(path.read_text() + f"\n{line}\n")


@pytest.mark.parametrize(
    ("module", "line", "expected"),
    [
        # upward: config is low in the pipeline, report high
        (
            "config/loader.py",
            "import needle_action.report",
            "needle_action.config.loader -> needle_action.report",
        ),
        # upward, and hidden in a function: lazy imports count too
        (
            "tokens/counting.py",
            "def _f():\n    from needle_action.recall.run import engine",
            "needle_action.tokens.counting -> needle_action.recall.run.engine",
        ),
        # upward, and only for the type checker: a typing-only import is a dependency all the same
        (
            "core/errors.py",
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from needle_action.config.model import Config",
            "needle_action.core.errors -> needle_action.config.model",
        ),
        # the faces are independent of each other
        ("action/main.py", "import needle_action.cli", "needle_action.action.main -> needle_action.cli"),
        # runtime is a leaf: nothing in the checker imports it
        (
            "recall/run/engine.py",
            "import needle_action.runtime",
            "needle_action.recall.run.engine -> needle_action.runtime",
        ),
        # the runtime library stays light: no Jinja2 behind it
        (
            "runtime/guard.py",
            "def _f():\n    from needle_action.assemble import render",
            "needle_action.runtime.guard -> needle_action.assemble.render",
        ),
        # no cycles, even inside one package
        (
            "assemble/templates/sandbox.py",
            "def _f():\n    from needle_action.assemble import render",
            "No cycles are allowed in needle_action.assemble.",
        ),
    ],
)
def test_the_contracts_fail_on_a_forbidden_import(package_copy, module, line, expected):
    add_line(package_copy / "needle_action" / module, line)
    proc = lint_imports(package_copy)
    assert proc.returncode == 1, report(proc)
    assert expected in proc.stdout, report(proc)


def test_a_new_top_level_module_must_pick_a_layer(package_copy):
    (package_copy / "needle_action" / "newthing.py").write_text('"""Not in any layer yet."""\n')
    proc = lint_imports(package_copy)
    assert proc.returncode == 1, report(proc)
    assert "needle_action.newthing" in proc.stdout, report(proc)


# --------------------------------------------------------------------------- import cycles
# Every import statement counts, at module level, inside a function or under ``if TYPE_CHECKING:``:
# a lazy or a typing-only import that closes a circle hides it from Python at start-up, not from
# the reader (the request model and its wire bodies once imported each other that way).


def _module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(tree: ast.Module) -> list[ast.Import | ast.ImportFrom]:
    return [n for n in ast.walk(tree) if isinstance(n, ast.Import | ast.ImportFrom)]


def _targets(node: ast.Import | ast.ImportFrom, module: str, is_package: bool, modules: set[str]) -> set[str]:
    """The modules NODE imports: ``from a import b`` is module ``a.b`` when there is one, else ``a``."""
    if isinstance(node, ast.Import):
        return {alias.name for alias in node.names}
    base = node.module or ""
    if node.level:  # relative: from the package holding MODULE
        package = module.split(".") if is_package else module.split(".")[:-1]
        base = ".".join(package[: len(package) - node.level + 1] + ([base] if base else []))
    return {f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names}


def import_graph(root: Path, package: str = PACKAGE) -> dict[str, set[str]]:
    """module -> the package's modules it imports, from the sources under ROOT/PACKAGE."""
    files = {_module_name(root, p): p for p in sorted((root / package).rglob("*.py"))}
    graph: dict[str, set[str]] = {}
    for module, path in files.items():
        edges = graph.setdefault(module, set())
        for node in _imports(ast.parse(path.read_text(encoding="utf-8"))):
            for target in _targets(node, module, path.name == "__init__.py", set(files)):
                if target in files and target != module:
                    edges.add(target)
    return graph


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = stack[stack.index(v) :]
            del stack[stack.index(v) :]
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_cycle_check_finds_a_cycle_hidden_in_a_function(tmp_path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from pkg import b\n")
    (pkg / "b.py").write_text("def f():\n    from . import c\n")
    (pkg / "c.py").write_text("import pkg.a\n")
    (pkg / "d.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg import e\n")
    (pkg / "e.py").write_text("import pkg.d\n")
    graph = import_graph(tmp_path, "pkg")
    assert graph["pkg.b"] == {"pkg.c"}
    assert graph["pkg.d"] == {"pkg.e"}
    assert import_cycles(graph) == [["pkg.a", "pkg.b", "pkg.c"], ["pkg.d", "pkg.e"]]


def test_no_import_cycles_among_the_modules():
    graph = import_graph(REPO)
    assert len(graph) > 50, "the graph is suspiciously small"
    assert sum(map(len, graph.values())) > 200, "the graph is suspiciously small"
    assert import_cycles(graph) == []


def test_ruff_refuses_relative_imports_with_our_settings(tmp_path):
    # a relative import hides which layer it reaches; TID252 (pyproject) bans them all
    bad = tmp_path / "bad.py"
    bad.write_text("from . import sibling\n\nprint(sibling)\n")
    exe = shutil.which("ruff") or shutil.which("ruff", path=str(Path(sys.executable).parent))
    assert exe, "ruff is not installed: pip install -e '.[dev]'"
    proc = subprocess.run(
        [exe, "check", "--no-cache", "--config", str(REPO / "pyproject.toml"), str(bad)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 1, report(proc)
    assert "TID252" in proc.stdout, report(proc)


# ---------------------------------------------------------------------------- small units

MAX_FUNCTION_LINES = 60  # a function fits on a screen
MAX_CLASS_LINES = 250  # a class is one concept: past this it is several


def long_units(root: Path, package: str = PACKAGE) -> list[str]:
    """``file:line: function NAME is N lines`` for every function of ROOT's PACKAGE longer than
    MAX_FUNCTION_LINES and every class longer than MAX_CLASS_LINES (from its ``def`` or ``class``
    line to its last, docstring and comments inside included; nested ones are measured too)."""
    found = []
    for path in sorted((root / package).rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                kind, limit = "class", MAX_CLASS_LINES
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                kind, limit = "function", MAX_FUNCTION_LINES
            else:
                continue
            lines = (node.end_lineno or node.lineno) - node.lineno + 1
            if lines > limit:
                where = path.relative_to(root).as_posix()
                found.append(f"{where}:{node.lineno}: {kind} {node.name} is {lines} lines (at most {limit})")
    return found


def test_no_function_over_60_lines_and_no_class_over_250():
    assert long_units(REPO) == [], "split these units (docs/architecture.md, Conventions)"


def _unit(kind: str, name: str, lines: int) -> str:
    """Source of a KIND (``def``/``class``) NAME spanning exactly LINES lines."""
    head = f"{kind} {name}():" if kind == "def" else f"class {name}:"
    return "\n".join([head, *(f"    x{i} = {i}" for i in range(lines - 1))]) + "\n"


def test_the_size_check_finds_a_long_function_and_a_long_class(tmp_path):
    folder = tmp_path / PACKAGE / "deep"
    folder.mkdir(parents=True)
    fits = _unit("def", "fits", MAX_FUNCTION_LINES) + _unit("class", "Fits", MAX_CLASS_LINES)
    (folder / "fits.py").write_text(fits, encoding="utf-8")
    assert long_units(tmp_path) == []
    method = _unit("def", "method", MAX_FUNCTION_LINES + 1).replace("\n", "\n    ")
    (folder / "long.py").write_text(
        "async " + _unit("def", "long", MAX_FUNCTION_LINES + 1) + "class Box:\n    " + method,
        encoding="utf-8",
    )
    assert long_units(tmp_path) == [
        f"{PACKAGE}/deep/long.py:1: function long is 61 lines (at most 60)",
        f"{PACKAGE}/deep/long.py:63: function method is 61 lines (at most 60)",
    ]
    (folder / "long.py").write_text(_unit("class", "Big", MAX_CLASS_LINES + 1), encoding="utf-8")
    assert long_units(tmp_path) == [f"{PACKAGE}/deep/long.py:1: class Big is 251 lines (at most 250)"]


# ---------------------------------------------------------------------------- the house rules
# docs/architecture.md, "The rules of the house": packages only at the top, small rooms, the
# environment read in one place, the hidden-path rules in the workspace, capabilities not names.

MAX_MODULES_PER_FOLDER = 20


def loose_modules(root: Path, package: str = PACKAGE) -> list[str]:
    """Modules directly in PACKAGE besides ``__init__`` and ``__main__``."""
    return sorted(p.name for p in (root / package).glob("*.py") if p.stem not in ("__init__", "__main__"))


def crowded_folders(root: Path, package: str = PACKAGE) -> list[str]:
    """Folders of PACKAGE holding more than MAX_MODULES_PER_FOLDER modules (``__init__`` not counted)."""
    out = []
    for folder in sorted({p.parent for p in (root / package).rglob("*.py")}):
        n = sum(1 for p in folder.glob("*.py") if p.stem != "__init__")
        if n > MAX_MODULES_PER_FOLDER:
            out.append(f"{folder.relative_to(root).as_posix()}: {n} modules")
    return out


def files_naming(root: Path, pattern: str, package: str = PACKAGE, *, skip: str | None = None) -> list[str]:
    """Files of PACKAGE whose code (comments and docstrings left out) matches PATTERN."""
    found = []
    rx = re.compile(pattern)
    for path in sorted((root / package).rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if skip and rel.startswith(skip):
            continue
        if any(rx.search(line) for line in _code_lines(path.read_text(encoding="utf-8"))):
            found.append(rel)
    return found


def _code_lines(source: str) -> list[str]:
    """SOURCE's lines without comments and docstrings (what runs, not what is said about it)."""
    tree = ast.parse(source)
    doc_lines: set[int] = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr):
            value = body[0].value
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                doc_lines.update(range(body[0].lineno, (body[0].end_lineno or body[0].lineno) + 1))
    lines = source.splitlines()
    return [line.split("#", 1)[0] for i, line in enumerate(lines, 1) if i not in doc_lines]


ENVIRONMENT = r"os\.environ|os\.getenv|getenv\("
PROVIDER_NAME_TEST = (
    r"provider\)?\s*(==|!=)\s*[\"']|[\"'](anthropic|openai|local)[\"']\s*(==|!=)\s*\w*provider"
)


def test_the_top_level_holds_packages_only():
    assert loose_modules(REPO) == [], "each module belongs in the package whose job it does"


def test_no_folder_holds_more_than_20_modules():
    assert crowded_folders(REPO) == []


def test_the_environment_is_read_at_the_faces_and_in_one_module():
    readers = files_naming(REPO, ENVIRONMENT)
    assert readers == [
        "needle_action/action/settings.py",
        "needle_action/action/workflow.py",
        "needle_action/core/environment.py",
    ]


def test_the_hidden_path_rules_live_in_the_workspace():
    assert files_naming(REPO, r"\ballow_hidden\b") == [
        "needle_action/config/model.py",
        "needle_action/core/workspace.py",
    ]


def test_no_code_outside_providers_tests_a_provider_by_name():
    assert files_naming(REPO, PROVIDER_NAME_TEST, skip="needle_action/providers/") == []


def test_the_house_rules_see_what_they_forbid(tmp_path):
    pkg = tmp_path / PACKAGE
    (pkg / "many").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "loose.py").write_text('"""os.environ is only named here."""\nx = 1  # os.environ\n')
    for i in range(MAX_MODULES_PER_FOLDER + 1):
        (pkg / "many" / f"m{i}.py").write_text("")
    (pkg / "many" / "m0.py").write_text(
        "import os\nkey = os.environ.get('K')\nif cfg.provider == 'anthropic':\n    pass\n"
    )
    assert loose_modules(tmp_path) == ["loose.py"]
    assert crowded_folders(tmp_path) == [f"{PACKAGE}/many: {MAX_MODULES_PER_FOLDER + 1} modules"]
    assert files_naming(tmp_path, ENVIRONMENT) == [f"{PACKAGE}/many/m0.py"]
    assert files_naming(tmp_path, PROVIDER_NAME_TEST) == [f"{PACKAGE}/many/m0.py"]


def _layer_names(text: str) -> set[str]:
    """The module names of a layer line: ``cli | action`` or ``cli.py | action/`` -> {cli, action}."""
    return {part.strip().removesuffix(".py").removesuffix("/") for part in text.split("|")}


def diagram_layers(markdown: str) -> list[set[str]]:
    """The layers the Mermaid diagram of docs/architecture.md draws, top to bottom."""
    diagram = markdown.split("```mermaid", 1)[1].split("```", 1)[0]
    labels = [label for line in diagram.splitlines() for label in line.split('"')[1::2]]
    return [_layer_names(label) for label in dict.fromkeys(labels)]


def contract_layers(ini: str) -> list[set[str]]:
    """The layers of .importlinter's layers contract, top to bottom."""
    block = ini.split("layers =", 1)[1]
    lines = []
    for line in block.splitlines()[1:]:
        if not line.startswith("    ") or line.strip().startswith(";"):
            break
        lines.append(line)
    return [_layer_names(line) for line in lines]


def test_the_diagram_draws_the_enforced_layers():
    drawn = diagram_layers((REPO / "docs" / "architecture.md").read_text(encoding="utf-8"))
    enforced = contract_layers((REPO / ".importlinter").read_text(encoding="utf-8"))
    assert len(enforced) > 10
    assert drawn == enforced


def test_the_diagram_check_sees_a_missing_module():
    md = '```mermaid\nflowchart TD\n    a["cli.py | action/"] --> b["flow/"]\n```\n'
    ini = "layers =\n    cli | action | runtime\n    flow\nexhaustive = true\n"
    assert diagram_layers(md) == [{"cli", "action"}, {"flow"}]
    assert diagram_layers(md) != contract_layers(ini)


if __name__ == "__main__":  # the script-level check
    graph = import_graph(REPO)
    cycles = import_cycles(graph)
    print(f"{len(graph)} modules, {sum(map(len, graph.values()))} imports, {len(cycles)} import cycles")
    for cycle in cycles:
        print("  cycle:", " <-> ".join(cycle))
    sys.exit(1 if cycles else 0)
