"""Files that run without the package: the builder worker runs as ``python -I -c <its source>`` and
imports nothing of needle's, so it restates the frame format of :mod:`needle_action.core.pipes` (a
deliberate copy), which this holds together; the Dockerfile runs ``tokens/tiktoken_cache.py`` on its
own before needle is installed."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from needle_action.assemble.builder import guard as builder_guard
from needle_action.assemble.builder import worker as builder_worker
from needle_action.core import pipes
from needle_action.tokens import tiktoken_cache


def test_the_builder_worker_frames_messages_as_pipes_does():
    assert builder_worker.HEADER.format == pipes.HEADER.format
    assert builder_worker.HEADER.size == pipes.HEADER.size == 8


def _imported(path: str) -> set[str]:
    tree = ast.parse(Path(path).read_text(encoding="utf-8"))
    modules = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    return modules | {node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}


@pytest.mark.parametrize("module", [builder_worker, builder_guard, tiktoken_cache], ids=lambda m: m.__name__)
def test_the_files_that_run_alone_import_nothing_of_needles(module):
    modules = _imported(module.__file__)
    assert modules
    assert not any(m.split(".")[0] == "needle_action" for m in modules), sorted(modules)
