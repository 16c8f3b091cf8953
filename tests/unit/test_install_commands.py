"""The install commands users and CI run build the portable llama.cpp (issue 17): the README's two
quickstart commands, CONTRIBUTING's, and .ci/run running the README's test command verbatim."""

from __future__ import annotations

import re
from pathlib import Path

from needle_action.providers.local.build import PORTABLE_CMAKE_ARGS

ROOT = Path(__file__).resolve().parents[2]
PORTABLE = f'CMAKE_ARGS="{PORTABLE_CMAKE_ARGS}" python3 -m pip install --no-cache-dir -e '


def _bash_blocks(text: str) -> list[str]:
    return [b.strip() for b in re.findall(r"```bash\n(.*?)```", text, flags=re.S)]


def test_the_quickstart_is_two_portable_commands_and_ci_runs_the_second_verbatim():
    readme = (ROOT / "README.md").read_text()
    quickstart = readme[readme.index("## Quickstart") : readme.index("## On a pull request")]
    first, second = _bash_blocks(quickstart)
    assert first == PORTABLE + "'.[local]' && needle check --config examples/needle.toml"
    assert second == PORTABLE + "'.[dev,local]' && python3 -m pytest -n 2 --dist loadfile"
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert second in ci
    assert not [line for line in ci if "pip install" in line and line != second]
    assert "needle doctor" in quickstart


def test_contributing_installs_the_same_build():
    contributing = (ROOT / "CONTRIBUTING.md").read_text()
    assert PORTABLE + "'.[dev,local]'" in contributing
