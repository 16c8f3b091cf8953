"""``needle init``, the listing: the repository's files, walked once and shared by every finder.

Templates, fixtures, Semantic Kernel prompts and Python files are all looked for in the same
tree; one walk lists it and each finder filters the listing (:meth:`Tree.files`), instead of
each walking it again.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from needle_action.core.paths import is_inside

# Folders no finder looks in, besides every hidden one (.git, .venv, the tool caches), which the
# walk skips by its dot. A finder that skips more names (code: build/, dist/) says so in
# Tree.files: the walk prunes only what every finder prunes.
SKIP_DIRS = frozenset({"venv", "node_modules", "__pycache__", "site-packages"})


@dataclass(frozen=True)
class Folder:
    """One folder of the walk: its path as os.walk gives it, the folder names from the root down
    to it, and its file names, sorted."""

    path: str
    parts: tuple[str, ...]
    files: tuple[str, ...]


@dataclass(frozen=True)
class Tree:
    """Every folder under ROOT, in the walk's order: top-down, sub-folders by name, no symlinked
    folder followed (os.walk's default)."""

    root: Path
    folders: tuple[Folder, ...]

    @classmethod
    def walk(cls, root: Path) -> Tree:
        """ROOT listed: the one os.walk of ``needle init``."""
        folders: list[Folder] = []
        parts_of: dict[str, tuple[str, ...]] = {}
        for folder, dirs, files in os.walk(root):
            parts = parts_of.pop(folder, ())
            dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS and not d.startswith("."))
            # os.walk names a sub-folder os.path.join(folder, d): its parts are known before it is listed
            parts_of.update({os.path.join(folder, d): (*parts, d) for d in dirs})
            folders.append(Folder(folder, parts, tuple(sorted(files))))
        return cls(root, tuple(folders))

    def files(
        self,
        suffixes: tuple[str, ...],
        skip: frozenset[str] = SKIP_DIRS,
        *,
        exact: bool = False,
        links: bool = True,
        limit: int | None = None,
    ) -> list[Path]:
        """The regular files inside the root with one of SUFFIXES, in the walk's order, outside
        folders named in SKIP. EXACT compares the name's ending as written (``.py``), else the
        suffix in lower case (``.J2`` is a template); LINKS=False leaves out symlinked files;
        LIMIT stops after that many files."""
        out: list[Path] = []
        for folder in self.folders:
            if any(part in skip for part in folder.parts):
                continue
            for name in folder.files:
                p = Path(folder.path) / name
                matches = name.endswith(suffixes) if exact else p.suffix.lower() in suffixes
                if not matches or (not links and p.is_symlink()):
                    continue
                if p.is_file() and is_inside(self.root, p):
                    out.append(p)
                    if limit is not None and len(out) >= limit:
                        return out
        return out


def listing(root: Path, tree: Tree | None) -> Tree:
    """TREE, the listing of ROOT made once, or (a caller that made none) ROOT walked now."""
    if tree is None:
        return Tree.walk(root)
    if tree.root != root:  # a listing of another folder would find another folder's files
        raise ValueError(f"the listing is of {tree.root}, not of {root}")
    return tree


__all__ = ["SKIP_DIRS", "Folder", "Tree", "listing"]
