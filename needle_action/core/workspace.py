"""The workspace a run reads: one folder, and the rules every path a user wrote must keep.

Templates, fixtures, tools files, filler globs and builders come from pull requests, so every file
they name must stay inside the threshold file's folder (symlinks resolved) and out of hidden files
and folders (``.git/``, ``.github/``, ``.env``) unless ``[files] allow_hidden`` lists them; ``.git``
never. :class:`Workspace` holds the folder and that list, built once when the threshold file loads
(``Config.workspace``), and every stage that reads a file takes it: the rules are applied here only.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from needle_action.core.errors import ConfigError
from needle_action.core.paths import (
    PathEscape,
    _below,
    check_inside,
    check_relative,
    display_path,
    relative_path,
)

# never readable by templates, whatever an allow-list says: actions/checkout persists the token in
# .git/config, and the object store holds every version of every file
NEVER_VISIBLE = frozenset({".git"})
# Files a cloud's GitHub login action writes into the workspace, that is, into the checkout a pull
# request's templates, fixtures and globs read: google-github-actions/auth's credentials file
# (a key, or a token request for Workload Identity Federation). Never prompt material, whatever
# [files] allow_hidden says: a PR's `fixtures = ["*.json"]` would otherwise put it in a prompt.
NEVER_READ = ("gha-creds-*.json",)


def _hidden_parts(rel: str | None) -> list[str]:
    if not rel or rel == ".":
        return []
    return [p for p in PurePosixPath(rel).parts if p.startswith(".") and p not in (".", "..")]


def _allowed(rel: str, allow: Sequence[str]) -> bool:
    for entry in allow:
        prefix = entry.replace("\\", "/").strip("/")
        if prefix and (rel == prefix or rel.startswith(prefix + "/")):
            return True
    return False


def _check_visible(root: Path, path: Path, allow: Sequence[str] = ()) -> None:
    """Refuse PATH when, below ROOT, it passes through a hidden file or folder (a name starting with
    ``.``), as written or with symlinks resolved, unless an ALLOW entry (a path relative to ROOT)
    covers it. ``.git`` and a cloud login's credentials file (:data:`NEVER_READ`) are refused even
    when allowed. Raises ``PathEscape("hidden")``."""
    for rel in (_below(root.absolute(), path.absolute()), relative_path(root, path, resolved=True)):
        parts = PurePosixPath(rel or "").parts
        if any(fnmatch.fnmatchcase(part, pattern) for part in parts for pattern in NEVER_READ):
            raise PathEscape("hidden")  # a credentials file: refused like .git, never allowed
        hidden = _hidden_parts(rel)
        if not hidden:
            continue
        if NEVER_VISIBLE.intersection(PurePosixPath(rel or "").parts) or not _allowed(rel or "", allow):
            raise PathEscape("hidden")


def _is_visible(root: Path, path: Path, allow: Sequence[str] = ()) -> bool:
    """Whether :func:`check_visible` lets PATH through (for filtering what a glob found)."""
    try:
        _check_visible(root, path, allow)
    except PathEscape:
        return False
    return True


def _check_confined(root: Path, path: Path, allow: Sequence[str] = ()) -> None:
    """The one confinement rule for a file a template, fixture or config names: PATH, symlinks
    resolved, lies inside ROOT (:func:`check_inside`) and out of hidden files and folders unless
    ALLOW lists them (:func:`check_visible`). Raises :class:`PathEscape`."""
    check_inside(root, path)
    _check_visible(root, path, allow)


def _confined_path(root: Path, rel: str, allow: Sequence[str] = ()) -> Path:
    """ROOT / REL when REL, a name relative to ROOT, is neither absolute nor climbs out
    (:func:`check_relative`) and the file it names is confined (:func:`check_confined`);
    else :class:`PathEscape`."""
    check_relative(rel)
    full = root / rel
    _check_confined(root, full, allow)
    return full


def _confine(root: Path, path: Path, *, what: str, file: str | None, allow: Sequence[str]) -> Path:
    """PATH (absolute, or relative to the working directory) if it stays inside ROOT and out of hidden
    files and folders (see :func:`check_visible`), else a ConfigError.

    WHAT names the file in the message ("fixture"); FILE is where the error points (default PATH).
    """
    full = path if path.is_absolute() else (Path.cwd() / path)
    try:
        _check_confined(root, full, allow)
    except PathEscape as exc:
        where = file or display_path(path)
        if exc.kind == "unresolvable":
            raise ConfigError(f"{what} cannot be resolved (symlink loop?)", file=where) from None
        if exc.kind in ("hidden", "invalid"):
            raise ConfigError(
                f"{what} {display_path(path)!r}: {ESCAPE_REASONS[exc.kind]}",
                file=where,
                hint=HIDDEN_HINT if exc.kind == "hidden" else None,
            ) from None
        raise ConfigError(
            f"{what} {display_path(path)} is outside the config root {display_path(root.absolute().resolve())}",
            file=where,
            hint="templates and fixtures must live inside the threshold file's folder",
        ) from None
    return full


# why a path may not be used, by PathEscape kind, for messages that end in ": WHY"
ESCAPE_REASONS: dict[str, str] = {
    "absolute": "absolute paths are not allowed",
    "parent": "'..' is not allowed",
    "unresolvable": "the path cannot be resolved (symlink loop?)",
    "outside": "it resolves (through a symlink) outside the folder of the threshold file",
    "hidden": "hidden files and folders (.git/, .github/, .env, ...) are off limits to templates",
    "invalid": "the path contains a NUL character",
}


HIDDEN_HINT = (
    "move the file out of the hidden folder, or list its folder in [files] allow_hidden of the "
    "threshold file (on the base branch, for pull requests); .git is never readable"
)


@dataclass(frozen=True)
class Workspace:
    """The folder paths are relative to (``root``) and the hidden paths it lets templates read."""

    root: Path
    allow_hidden: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "root", Path(self.root).absolute())  # frozen: set once, here
        object.__setattr__(self, "allow_hidden", tuple(self.allow_hidden))

    def resolved(self) -> Workspace:
        """The same workspace with its root's symlinks resolved (one key per real folder)."""
        return Workspace(self.root.resolve(), self.allow_hidden)

    def check(self, path: Path) -> None:
        """Refuse PATH unless, symlinks resolved, it lies inside the root and out of hidden files and
        folders the workspace does not allow. Raises :class:`PathEscape` (the caller words it)."""
        _check_confined(self.root, path, self.allow_hidden)

    def path(self, rel: str) -> Path:
        """ROOT / REL, when REL is a plain relative name (no absolute path, no ``..``) and the file
        it names passes :meth:`check`; else :class:`PathEscape`."""
        return _confined_path(self.root, rel, self.allow_hidden)

    def confine(self, path: Path, *, what: str, file: str | None = None) -> Path:
        """PATH (absolute, or relative to the working directory) if it passes :meth:`check`, else a
        ConfigError naming WHAT ("fixture") at FILE (default PATH)."""
        return _confine(self.root, path, what=what, file=file, allow=self.allow_hidden)

    def is_visible(self, path: Path) -> bool:
        """Whether PATH is out of hidden files and folders the workspace does not allow."""
        return _is_visible(self.root, path, self.allow_hidden)

    def glob(self, pattern: str) -> list[Path]:
        """The visible files and folders PATTERN matches below the root, sorted."""
        return sorted(p for p in self.root.glob(pattern) if self.is_visible(p))

    def plain(self) -> tuple[str, list[str]]:
        """The workspace as plain data, for a worker process (:meth:`from_plain` reads it back)."""
        return str(self.root), list(self.allow_hidden)

    @classmethod
    def from_plain(cls, data: tuple[str, list[str]]) -> Workspace:
        return cls(Path(data[0]), tuple(data[1]))


__all__ = ["ESCAPE_REASONS", "HIDDEN_HINT", "NEVER_READ", "NEVER_VISIBLE", "Workspace"]
