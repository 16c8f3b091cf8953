"""Counting what a run reads: the opens of a project's files for reading, and the calls of a
function (a parser), in this process; and a ``.prompty`` whose data is in files of its own. For
the tests of the file caches (:mod:`needle_action.core.filecache`): a file is read once per
version."""

from __future__ import annotations

import builtins
import io
import json
import os
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest

from tests.builders import Project

# A retrieval app's .prompty (notes looped over in the system text, the question in the user turn)
# that reads a file for its sample, one for an input's default and one for a request parameter.
PROMPTY = """---
name: Harbour helpdesk
model:
  api: chat
  parameters:
    max_tokens: 200
    metadata: ${file:meta.json}
inputs:
  policy:
    default: ${file:policy.txt}
sample: ${file:sample.json}
---
system:
You answer questions about the harbour ferries using only the notes below.
{{ policy }}
{% for s in sources %}
## {{ s.title }}
{{ s.text }}
{% endfor %}
user:
{{ question }}
"""
SAMPLE = {
    "sources": [
        {"title": "Winter timetable", "text": "The first ferry leaves the north pier at 06:40 on weekdays."},
        {"title": "Fares", "text": "A return ticket costs the same as two singles after 18:00."},
    ],
    "question": "When does the first weekday ferry leave?",
}
POLICY = "Answer briefly.\n"
PROMPTY_FILES = {
    "prompts/answer.prompty": PROMPTY,
    "prompts/sample.json": json.dumps(SAMPLE),
    "prompts/policy.txt": POLICY,
    "prompts/meta.json": json.dumps({"user_id": "harbour"}),
}


def count_reads(monkeypatch: pytest.MonkeyPatch, project: Project, *names: str) -> Counter[str]:
    """Opens of PROJECT's files NAMES for reading in this process from now on, by name: every
    reader goes through ``open`` (``read_text``, ``Path.read_text``, Jinja's loader); writes are
    not counted (a test editing a file)."""
    watched = {os.path.realpath(project.path(n)): n for n in names}
    reads: Counter[str] = Counter()
    real_open = builtins.open

    def counting_open(file: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        if isinstance(file, str | os.PathLike) and not set(mode) & set("wax+"):
            name = watched.get(os.path.realpath(os.fspath(file)))
            if name is not None:
                reads[name] += 1
        return real_open(file, mode, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", counting_open)
    monkeypatch.setattr(io, "open", counting_open)
    return reads


def count_calls(monkeypatch: pytest.MonkeyPatch, module: object, name: str) -> list[tuple[Any, ...]]:
    """The arguments of each call of MODULE.NAME from now on (calls through the module's global)."""
    calls: list[tuple[Any, ...]] = []
    real: Callable[..., Any] = getattr(module, name)

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, counted)
    return calls
