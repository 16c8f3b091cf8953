"""The builder worker runs as ``python -I -c <its source>`` and imports nothing of needle's, so it
restates the frame format of :mod:`needle_action.core.pipes` (a deliberate copy); this holds the two
together."""

from __future__ import annotations

import ast
from pathlib import Path

from needle_action.assemble.builder import worker as builder_worker
from needle_action.core import pipes


def test_the_builder_worker_frames_messages_as_pipes_does():
    assert builder_worker.HEADER.format == pipes.HEADER.format
    assert builder_worker.HEADER.size == pipes.HEADER.size == 8


def test_the_builder_worker_imports_only_the_standard_library():
    tree = ast.parse(Path(builder_worker.__file__).read_text(encoding="utf-8"))
    modules = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    modules |= {node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert modules
    assert not any(m.split(".")[0] == "needle_action" for m in modules), sorted(modules)
