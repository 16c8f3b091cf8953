"""needle_action imports only what its install brings: the standard library, [project.dependencies],
and the [local] extra's llama_cpp (imported only by the embedded model's worker). A module that
imported a dev-only package (numpy, scipy) would pass every test here and fail in the image."""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "needle_action"
# extras, imported lazily and only where that extra is needed (boto3, botocore and google-auth come
# with [clouds] through anthropic[bedrock,vertex])
OPTIONAL = {"llama_cpp": "local", "boto3": "clouds", "botocore": "clouds", "google": "clouds"}
# imported directly, installed by a declared dependency that requires them (their parent)
VIA = {"markupsafe": "jinja2", "dotpromptz_handlebars": "dotpromptz"}


def _requirement_names(specs: list[str]) -> set[str]:
    return {re.split(r"[<>=!~\[; ]", s, maxsplit=1)[0].strip().lower().replace("_", "-") for s in specs}


def _top_level_imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def test_the_package_imports_only_its_declared_dependencies():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = _requirement_names(project["dependencies"])
    dists = packages_distributions()
    undeclared = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        for name in _top_level_imports(path) - set(sys.stdlib_module_names) - {"needle_action", "__future__"}:
            if name in VIA:
                assert VIA[name] in declared, name
                continue
            if name in OPTIONAL:
                assert OPTIONAL[name] in project["optional-dependencies"], name
                continue
            providers = {d.lower().replace("_", "-") for d in dists.get(name, [name])}
            if not providers & declared:
                undeclared.setdefault(name, []).append(str(path.relative_to(ROOT)))
    assert not undeclared, f"imported but not in [project.dependencies]: {undeclared}"
