"""Every environment variable needle reads, named and typed in one place.

The action's face reads its own inputs (``INPUT_*``, ``GITHUB_*``: :mod:`needle_action.action.settings`,
and the runner's files: :mod:`needle_action.action.workflow`). Everything else is read here: needle's
own switches, the folders it caches in, and, through :func:`process`, the providers' keys and
endpoints (each provider's spec names its variables) and what child processes inherit. The values
are read when asked for, never copied at start-up: a variable set for one command, or by a test,
is seen at once.

| variable | what it sets |
|---|---|
| ``NEEDLE_CACHE_DIR`` | the folder of every cache (results, the embedded model); else ``$XDG_CACHE_HOME`` or ``~/.cache`` |
| ``TIKTOKEN_CACHE_DIR`` | tiktoken's encodings (seeded offline from ``bpe-openai``); ``""`` turns caching off |
| ``NEEDLE_BUILDER_PYTHON`` | the interpreter builders run with, when needle's own is not usable by their user |
| ``NEEDLE_LOCAL_THREADS`` | llama.cpp's decoding threads (unset: chosen from the CPUs free) |
| ``NEEDLE_LOCAL_TRACE`` | ``1``: the embedded model prints each call's counts on stderr |
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from pathlib import Path

CACHE_DIR = "NEEDLE_CACHE_DIR"
TIKTOKEN_CACHE_DIR = "TIKTOKEN_CACHE_DIR"
BUILDER_PYTHON = "NEEDLE_BUILDER_PYTHON"
LOCAL_THREADS = "NEEDLE_LOCAL_THREADS"
LOCAL_TRACE = "NEEDLE_LOCAL_TRACE"


def process() -> Mapping[str, str]:
    """The process environment as it is now: where providers look up their keys and endpoints (by
    the names their specs give), and what a child process may inherit (an allow-list picks)."""
    return os.environ


def value(name: str) -> str | None:
    """Variable NAME, or None when unset."""
    return os.environ.get(name)


def cache_home() -> Path:
    """``$XDG_CACHE_HOME``, else ``~/.cache``."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")


def cache_folder(default_name: str, inside: str = "") -> Path:
    """``$NEEDLE_CACHE_DIR/INSIDE`` when set, else ``cache_home()/DEFAULT_NAME/INSIDE``."""
    own = os.environ.get(CACHE_DIR)
    base = Path(own) if own else cache_home() / default_name
    return base / inside if inside else base


def tiktoken_cache_dir() -> Path | None:
    """tiktoken's cache folder; None when ``TIKTOKEN_CACHE_DIR`` is set empty (its "no cache")."""
    own = os.environ.get(TIKTOKEN_CACHE_DIR)
    if own == "":
        return None
    return Path(own or Path(tempfile.gettempdir()) / "data-gym-cache")


def builder_python() -> str | None:
    """The interpreter ``NEEDLE_BUILDER_PYTHON`` names, or None."""
    return os.environ.get(BUILDER_PYTHON) or None


def local_threads(default: int) -> int:
    """llama.cpp's decoding threads: ``NEEDLE_LOCAL_THREADS``, else DEFAULT."""
    return int(os.environ.get(LOCAL_THREADS) or default)


def local_trace() -> bool:
    """Whether the embedded model traces its calls (``NEEDLE_LOCAL_TRACE`` set and not 0)."""
    return os.environ.get(LOCAL_TRACE, "") not in ("", "0")


__all__ = [
    "BUILDER_PYTHON",
    "CACHE_DIR",
    "LOCAL_THREADS",
    "LOCAL_TRACE",
    "TIKTOKEN_CACHE_DIR",
    "builder_python",
    "cache_folder",
    "cache_home",
    "local_threads",
    "local_trace",
    "process",
    "tiktoken_cache_dir",
    "value",
]
