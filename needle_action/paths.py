"""Paths as the user reads them (placeholder; the full module lands with the config/assemble split)."""

from __future__ import annotations

import os
from pathlib import Path


def display_path(path: str | os.PathLike) -> str:
    """A path as the user should read it: relative to the working directory when below it."""
    p = Path(path)
    if not p.is_absolute():
        return str(p)
    try:
        rel = os.path.relpath(p)
    except ValueError:  # another drive on Windows
        return str(p)
    return str(p) if rel.startswith("..") else rel


def relative(root: Path, path: Path) -> str:
    """PATH relative to ROOT in POSIX form (symlinks resolved if needed), else as displayed."""
    for base, p in (
        (root.absolute(), path.absolute()),
        (root.absolute().resolve(), path.absolute().resolve()),
    ):
        try:
            return p.relative_to(base).as_posix()
        except ValueError:
            continue
    return display_path(path)
