"""The architecture holds itself: the layer contracts in ``.importlinter`` really run (``lint-imports``
from the [dev] extra; a missing tool is a failure, not a skip), pass on the repository, and fail on a
copy of the package into which a forbidden import was written, so a green result means "checked and
clean", never "nothing ran".
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CONTRACTS = REPO / ".importlinter"


def lint_imports(root: Path) -> subprocess.CompletedProcess:
    """``lint-imports`` with our contracts over the ``needle_action`` found in ROOT (first on the path,
    so this checkout's copy is analysed, not an installed one)."""
    exe = shutil.which("lint-imports") or shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    if not exe:
        pytest.fail("lint-imports is not installed: pip install -e '.[dev]' (import-linter is in the dev extra)")
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
        # upward: config is the bottom of the pipeline, report its top
        ("config/loader.py", "import needle_action.report", "needle_action.config.loader -> needle_action.report"),
        # upward, and hidden in a function: lazy imports count too
        (
            "tokens/counting.py",
            "def _f():\n    from needle_action.recall import engine",
            "needle_action.tokens.counting -> needle_action.recall.engine",
        ),
        # the faces are independent of each other
        ("action/main.py", "import needle_action.cli", "needle_action.action.main -> needle_action.cli"),
        # runtime is a leaf: nothing in the checker imports it
        ("recall/engine.py", "import needle_action.runtime", "needle_action.recall.engine -> needle_action.runtime"),
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
