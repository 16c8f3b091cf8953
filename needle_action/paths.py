"""Paths from untrusted input: how they are shown, how they are kept inside a root, how they are read.

Templates, fixtures and globs come from pull requests, so every path a user wrote is checked
against the folder it must stay in. The rules live here once:

* :func:`check_relative` is the lexical rule for a name relative to a root (no absolute path, no
  drive letter, no ``..``); :func:`check_inside` is the rule after symlinks are resolved (the real
  path stays at or below the real root). Both raise :class:`PathEscape` with a ``kind``, so each
  caller words the error its own way; :func:`confine` is the wording used for fixture files;
* :func:`display_path` and :func:`relative` are how a path appears in messages and results;
* :func:`check_visible` keeps templates away from repository internals: no hidden file or folder
  (``.git/``, ``.github/``, ``.env``) unless an allow-list names it, and ``.git`` never;
* :func:`read_text` reads UTF-8 (up to a size) and turns a decoding error into the line to fix;
* :func:`write_file` and :func:`ensure_folder` write below a trusted root without following a
  symlink anywhere on the way (``O_NOFOLLOW`` per part, relative to the parent's descriptor), so a
  symlink a pull request committed cannot redirect a write outside the workspace.

Bottom of the import graph: standard library and :mod:`needle_action.errors` only.
"""

from __future__ import annotations

import errno
import fnmatch
import os
import re
import stat
from collections.abc import Sequence
from pathlib import Path, PurePosixPath
from typing import Literal

from needle_action.errors import ConfigError, NeedleError

EscapeKind = Literal["absolute", "parent", "unresolvable", "outside", "hidden", "invalid"]

# never readable by templates, whatever an allow-list says: actions/checkout persists the token in
# .git/config, and the object store holds every version of every file
NEVER_VISIBLE = frozenset({".git"})
# Files a cloud's GitHub login action writes into the workspace, that is, into the checkout a pull
# request's templates, fixtures and globs read: google-github-actions/auth's credentials file
# (a key, or a token request for Workload Identity Federation). Never prompt material, whatever
# [files] allow_hidden says: a PR's `fixtures = ["*.json"]` would otherwise put it in a prompt.
NEVER_READ = ("gha-creds-*.json",)

_DRIVE = re.compile(r"^[A-Za-z]:")


# --------------------------------------------------------------------------- display


def display_path(path: str | os.PathLike[str]) -> str:
    """A path as the user should read it: relative to the working directory when below it."""
    p = Path(path)
    if not p.is_absolute():
        return str(p)
    try:
        rel = os.path.relpath(p)
    except ValueError:  # another drive on Windows
        return str(p)
    return str(p) if rel.startswith("..") else rel


def relative_path(root: Path, path: Path, *, resolved: bool = False) -> str | None:
    """PATH relative to ROOT in POSIX form, or None when PATH is not below ROOT.

    By default the paths are compared as written first, then with symlinks resolved (a template
    reached through a symlinked folder keeps the name the user wrote). ``resolved=True`` compares
    only the resolved paths, so ``..`` and symlinks are collapsed before the comparison.
    """
    if not resolved:
        rel = _below(root.absolute(), path.absolute())
        if rel is not None:
            return rel
    return _below(root.absolute().resolve(), path.absolute().resolve())


def _below(base: Path, path: Path) -> str | None:
    return path.relative_to(base).as_posix() if path.is_relative_to(base) else None


def relative(root: Path, path: Path, *, resolved: bool = False, default: str | None = None) -> str:
    """PATH relative to ROOT (see :func:`relative_path`); else DEFAULT, or PATH as displayed."""
    rel = relative_path(root, path, resolved=resolved)
    if rel is not None:
        return rel
    return display_path(path) if default is None else default


# --------------------------------------------------------------------------- confinement


class PathEscape(Exception):
    """A path does not stay inside its root. ``kind`` says why; callers word the error."""

    def __init__(self, kind: EscapeKind) -> None:
        super().__init__(kind)
        self.kind: EscapeKind = kind


def check_relative(name: str) -> None:
    """Refuse NAME (a path relative to a root) if it is absolute or climbs out with ``..``.

    Backslashes count as separators and drive letters as absolute, whatever the host, so a name
    that would escape on Windows is refused everywhere.
    """
    if "\x00" in name:  # the OS refuses it with a ValueError; say so as a path problem
        raise PathEscape("invalid")
    pure = PurePosixPath(name.replace("\\", "/"))
    if pure.is_absolute() or _DRIVE.match(name):
        raise PathEscape("absolute")
    if ".." in pure.parts:
        raise PathEscape("parent")


def check_inside(root: Path, path: Path) -> None:
    """Refuse PATH unless, symlinks resolved, it is ROOT or lies below it."""
    real_root = root.absolute().resolve()
    if "\x00" in str(path):
        raise PathEscape("invalid")
    try:
        real = path.resolve()
    except (OSError, RuntimeError):  # a symlink loop
        raise PathEscape("unresolvable") from None
    if not real.is_relative_to(real_root):
        raise PathEscape("outside")


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


def check_visible(root: Path, path: Path, allow: Sequence[str] = ()) -> None:
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


def is_visible(root: Path, path: Path, allow: Sequence[str] = ()) -> bool:
    """Whether :func:`check_visible` lets PATH through (for filtering what a glob found)."""
    try:
        check_visible(root, path, allow)
    except PathEscape:
        return False
    return True


def check_confined(root: Path, path: Path, allow_hidden: Sequence[str] = ()) -> None:
    """The one confinement rule for a file a template, fixture or config names: PATH, symlinks
    resolved, lies inside ROOT (:func:`check_inside`) and out of hidden files and folders unless
    ALLOW_HIDDEN lists them (:func:`check_visible`). Raises :class:`PathEscape`."""
    check_inside(root, path)
    check_visible(root, path, allow_hidden)


def confined_path(root: Path, rel: str, allow_hidden: Sequence[str] = ()) -> Path:
    """ROOT / REL when REL, a name relative to ROOT, is neither absolute nor climbs out
    (:func:`check_relative`) and the file it names is confined (:func:`check_confined`);
    else :class:`PathEscape`."""
    check_relative(rel)
    full = root / rel
    check_confined(root, full, allow_hidden)
    return full


def is_inside(root: Path, path: Path) -> bool:
    """Whether PATH, symlinks resolved, is ROOT or lies below it (for filtering found files)."""
    return path.resolve().is_relative_to(root.absolute().resolve())


def confine(
    root: Path, path: Path, *, what: str, file: str | None = None, allow_hidden: Sequence[str] = ()
) -> Path:
    """PATH (absolute, or relative to the working directory) if it stays inside ROOT and out of hidden
    files and folders (see :func:`check_visible`), else a ConfigError.

    WHAT names the file in the message ("fixture"); FILE is where the error points (default PATH).
    """
    full = path if path.is_absolute() else (Path.cwd() / path)
    try:
        check_confined(root, full, allow_hidden)
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
    "hidden": "hidden files and folders (.git/, .github/, .env, ...) and cloud login credentials "
    "(gha-creds-*.json) are off limits to templates",
    "invalid": "the path contains a NUL character",
}
HIDDEN_HINT = (
    "move the file out of the hidden folder, or list its folder in [files] allow_hidden of the "
    "threshold file (on the base branch, for pull requests); .git and gha-creds-*.json are never readable"
)


# --------------------------------------------------------------------------- reading


def read_text(
    path: Path,
    *,
    what: str,
    error_cls: type[NeedleError] = ConfigError,
    hint: str = "save it as UTF-8",
    file: str | None = None,
    max_bytes: int | None = None,
) -> str:
    """PATH's text. Invalid UTF-8 raises ERROR_CLS "WHAT is not valid UTF-8" at the offending line;
    a file above MAX_BYTES raises ERROR_CLS before it is read whole.

    FILE is where the error points (default: PATH as displayed). Other ``OSError``s propagate:
    callers word "not found" and "cannot read" themselves.
    """
    where = display_path(path) if file is None else file
    with open(path, "rb") as f:
        data = f.read() if max_bytes is None else f.read(max_bytes + 1)
    if max_bytes is not None and len(data) > max_bytes:
        raise error_cls(
            f"{what} is larger than {max_bytes:,} bytes",
            file=where,
            hint="prompts, templates and fixtures are text of a size a model can read; split it up",
        )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise error_cls(f"{what} is not valid UTF-8", file=where, line=line, hint=hint) from None


def last_content_line(text: str) -> int:
    """1-based number of the last non-blank line (where "at end of document" errors really are)."""
    lines = text.splitlines()
    for i in range(len(lines), 0, -1):
        if lines[i - 1].strip():
            return i
    return 1


# --------------------------------------------------------------------------- writing


class UnsafePath(OSError):
    """A write would follow a symlink, or reach something that is not a plain file or folder."""


_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_CLOEXEC", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


def _walk_parts(rel: str) -> list[str]:
    parts = [p for p in PurePosixPath(rel.replace("\\", "/")).parts if p not in ("", ".")]
    if any(p == ".." or p.startswith("/") for p in parts) or "\x00" in rel:
        raise UnsafePath(errno.EINVAL, f"not a plain relative path: {rel!r}")
    return parts


def _open_folder(root: Path, rel: str, *, create: bool) -> int:
    """A descriptor of ROOT/REL, reached part by part with O_NOFOLLOW (ROOT itself is trusted)."""
    fd = os.open(root, _DIR_FLAGS)
    try:
        for part in _walk_parts(rel):
            try:
                child = os.open(part, _DIR_FLAGS | _NOFOLLOW, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    raise
                os.mkdir(part, 0o755, dir_fd=fd)
                child = os.open(part, _DIR_FLAGS | _NOFOLLOW, dir_fd=fd)
            except OSError as exc:  # ELOOP: a symlink; ENOTDIR: a file where a folder should be
                raise UnsafePath(exc.errno, f"{part!r} in {rel!r} is a symlink or not a folder") from None
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        raise
    return fd


def ensure_folder(root: Path, rel: str) -> Path:
    """ROOT/REL, created if missing, every part below ROOT a real folder (no symlink); UnsafePath if not."""
    os.close(_open_folder(root, rel, create=True))
    return root / rel if rel else root


def refuse_links(folder: Path, names: Sequence[str]) -> None:
    """UnsafePath when any of NAMES in FOLDER exists as something other than a plain file
    (a symlink, a FIFO, a device) or as a hard link shared with another path."""
    for name in names:
        try:
            st = os.lstat(folder / name)
        except FileNotFoundError:
            continue
        if not stat.S_ISREG(st.st_mode) or st.st_nlink > 1:
            raise UnsafePath(
                errno.EPERM, f"{display_path(folder / name)} is a symlink, a hard link or not a file"
            )


def write_file(root: Path, rel: str, data: str | bytes) -> Path:
    """Write DATA to ROOT/REL, creating folders, following no symlink on the way or at the end.

    The target is opened relative to its folder's descriptor with O_NOFOLLOW and not truncated until
    it is known to be a plain file with a single link, so a committed symlink, FIFO or hard link is
    never written through. Raises UnsafePath (an OSError) instead.
    """
    *folders, name = _walk_parts(rel) or [""]
    if not name:
        raise UnsafePath(errno.EINVAL, f"no file name in {rel!r}")
    dfd = _open_folder(root, "/".join(folders), create=True)
    try:
        flags = os.O_WRONLY | os.O_CREAT | _NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
        try:
            fd = os.open(name, flags, 0o644, dir_fd=dfd)
        except OSError as exc:  # ELOOP: the file is a symlink; ENXIO: a FIFO without a reader
            raise UnsafePath(exc.errno, f"{rel!r} is a symlink or not a plain file") from None
    finally:
        os.close(dfd)
    with os.fdopen(fd, "wb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode) or st.st_nlink > 1:
            raise UnsafePath(errno.EPERM, f"{rel!r} is not a plain file of its own")
        f.truncate(0)
        f.write(data.encode("utf-8") if isinstance(data, str) else data)
    return root / rel


def write_user_file(path: Path, data: str | bytes) -> Path:
    """Write DATA to PATH, a file the user named on the command line (``--html``, ``--junit``),
    never through a symlink: the folders the user named are trusted as given, the file itself must
    not be a link or a special file (:func:`write_file`)."""
    path = Path(path)
    folder = path.parent
    folder.mkdir(parents=True, exist_ok=True)
    return write_file(folder, path.name, data)
