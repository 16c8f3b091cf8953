"""What the action trusts on a pull request, and what it never takes from the checkout.

Trusted: the base commit's threshold file (reviewed when it merged; read with ``git cat-file``, not
from the checkout), the workflow's inputs and its environment. Not trusted: every file of the
checkout, because the pull request wrote it. So:

* the head's ``needle.toml`` is measured with the base's endpoints, credentials and policy
  (:func:`needle_action.config.trust.apply_trust`); each difference becomes a note in the comment.
  ``trust-pr-config: true`` turns this off for teams that accept the risk (docs/security.md);
* the recall cache is read only from a folder the pull request cannot have shipped: by default
  outside the checkout, and a ``cache-dir`` inside it is refused when git tracks anything there or a
  symlink is on the way (then a cache outside the checkout is used, with a warning);
* the report folder is written without following symlinks, and never into a folder the pull request
  ships (a fresh one is made instead; ``report-path`` says where).

Events without a base (pushes, schedules) run the branch's own file: it is already merged.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from needle_action.config.loader import load_config
from needle_action.config.model import Config, FileAccess
from needle_action.config.trust import apply_trust, without_builders
from needle_action.core.errors import ConfigError, NeedleError
from needle_action.core.paths import (
    PathEscape,
    UnsafePath,
    check_inside,
    ensure_folder,
    relative_path,
    write_file,
)
from needle_action.pullrequest.baseline import git
from needle_action.pullrequest.settings import Settings
from needle_action.results.cache import default_cache_path

REPORT_DIR = ".needle-report"
CACHE_FILE = "recall.sqlite"


@dataclass(frozen=True)
class Trusted:
    """The settings a pull request is judged under."""

    config: Config | None  # the base's threshold file (settings only); None: the base has none
    applies: bool  # False: no base to trust (not a PR), or `trust-pr-config: true`

    @property
    def files(self) -> FileAccess | None:
        """What templates may read and builders may do: the base's ``[files]`` (None: the head's own)."""
        if not self.applies:
            return None
        return self.config.files if self.config is not None else FileAccess()


# --------------------------------------------------------------------------- the threshold file


def _config_rel(settings: Settings) -> str | None:
    return relative_path(settings.workspace, settings.config_path)


def read_base_file(settings: Settings, base_sha: str) -> bytes | None:
    """The threshold file's bytes at BASE_SHA (a blob: no checkout, no filters), or None."""
    rel = _config_rel(settings)
    if rel is None:
        return None
    # git from PATH with a fixed argv (no shell); the path is the runner's choice
    proc = subprocess.run(  # noqa: S603
        ["git", "cat-file", "blob", f"{base_sha}:{rel}"],  # noqa: S607
        cwd=str(settings.workspace),
        capture_output=True,
        timeout=60,
    )
    return proc.stdout if proc.returncode == 0 else None


def load_trusted(settings: Settings, base_sha: str | None, notes: list[str]) -> Trusted:
    """The base's threshold file, read from git; NOTES says when there is none or it does not load."""
    if settings.trust_pr_config:
        notes.append(
            "⚠️ `trust-pr-config` is on: this run used the pull request's own endpoints, keys and "
            "policy (see docs/security.md)."
        )
        return Trusted(None, applies=False)
    if base_sha is None:
        if settings.pull_request is not None:
            notes.append(
                "⚠️ The base commit could not be read, so its threshold file could not be either: "
                "this PR's own policy applied; endpoints and keys came from the workflow only."
            )
            return Trusted(None, applies=True)
        return Trusted(None, applies=False)  # a push or a schedule: the branch's own file
    if _config_rel(settings) is None:  # a threshold file outside the workspace: not the PR's
        return Trusted(None, applies=False)
    raw = read_base_file(settings, base_sha)
    if raw is None:
        notes.append(
            "The base has no threshold file: this PR's policy applies; endpoints and keys come from "
            "the providers' defaults and the workflow's environment, never from the PR."
        )
        return Trusted(None, applies=True)
    name = f"{_config_rel(settings)}@{base_sha[:12]}"
    try:
        text = raw.decode("utf-8")
        config = load_config(settings.config_path, text=text, check_paths=False)
    except (UnicodeDecodeError, NeedleError) as exc:
        why = exc.message if isinstance(exc, NeedleError) else "it is not valid UTF-8"
        notes.append(
            f"⚠️ The base's threshold file ({name}) does not load ({why}): this PR's own policy "
            "applied; endpoints and keys came from the workflow only."
        )
        return Trusted(None, applies=True)
    return Trusted(config, applies=True)


def head_config(settings: Settings, trusted: Trusted, notes: list[str]) -> Config:
    """The head's threshold file as it may be measured: loaded (paths checked against the trusted
    hidden-path list), then the trusted settings applied. Every change the PR proposes is a note."""
    path = settings.config_path
    if relative_path(settings.workspace, path) is not None:
        try:
            check_inside(settings.workspace, path)
        except PathEscape:  # outside, or a symlink loop
            raise ConfigError(
                "the threshold file resolves (through a symlink) outside the workspace",
                file=str(settings.config),
                hint="the pull request may not point the threshold file anywhere else",
            ) from None
    config = load_config(path, trusted_files=trusted.files)
    if not trusted.applies:
        return config
    effective, changes = apply_trust(config, trusted.config)
    notes.extend(c.describe() for c in changes)
    return effective


def for_base(config: Config, trusted: Trusted) -> Config:
    """The config the base is measured with: its own file is trusted as is; the head's file (a base
    without one) gets the same treatment as on the head side."""
    if not trusted.applies:
        return config
    if trusted.config is not None:  # its own file, trusted as is; builders only where it enables them
        if config.files.builders:
            return config
        return config.model_copy(update={"prompts": without_builders(config.prompts)[0]})
    return apply_trust(config, None)[0]


# --------------------------------------------------------------------------- files in the checkout


def shipped(workspace: Path, rel: str) -> bool:
    """Whether the checkout has anything at REL that git tracks (the pull request wrote it), or whether
    that cannot be told (not a repository, a symlink on the way) while something exists there."""
    proc = git(["ls-files", "-z", "--", rel], workspace, check=False, timeout=60)
    if proc.returncode == 0:
        return bool(proc.stdout.strip("\0"))
    return os.path.lexists(workspace / rel)


def cache_file(settings: Settings, notes: list[str]) -> Path:
    """Where the recall cache lives: outside the checkout unless ``cache-dir`` says otherwise, and
    never in a folder the pull request ships (see the module docstring)."""
    folder = settings.cache_dir
    if folder is None:
        return default_cache_path()
    full = folder if folder.is_absolute() else settings.workspace / folder
    rel = relative_path(settings.workspace, full)
    if rel is None:
        return full / CACHE_FILE
    problem = None
    if shipped(settings.workspace, rel):
        problem = "the pull request ships files there"
    else:
        try:
            ensure_folder(settings.workspace, rel)
        except UnsafePath as exc:
            problem = exc.strerror or str(exc)
    if problem is None:
        return full / CACHE_FILE
    fallback = default_cache_path()
    message = (
        f"cache-dir `{rel}` is not used ({problem}): a cache the checkout provides could fake "
        f"results. This run cached outside the checkout instead."
    )
    notes.append(message)
    settings.notices.warn(message)
    return fallback


def _fresh_report_folder(workspace: Path) -> str:
    return Path(tempfile.mkdtemp(prefix=REPORT_DIR + "-", dir=str(workspace))).name


def write_report(settings: Settings, files: dict[str, str]) -> Path:
    """Write the report FILES into ``.needle-report`` in the workspace (a fresh sibling when the
    checkout ships that folder, or anything in it is a symlink); returns the folder."""
    ws = settings.workspace
    rel = REPORT_DIR
    if shipped(ws, rel) or (os.path.lexists(ws / rel) and not (ws / rel).is_dir()):
        rel = _fresh_report_folder(ws)
        settings.notices.warn(f"the checkout has its own {REPORT_DIR}; the report went to {rel}")
    try:
        for name, text in files.items():
            write_file(ws, f"{rel}/{name}", text)
    except UnsafePath as exc:
        rel = _fresh_report_folder(ws)
        settings.notices.warn(f"{REPORT_DIR} is not safe to write ({exc.strerror}); the report went to {rel}")
        for name, text in files.items():
            write_file(ws, f"{rel}/{name}", text)
    return ws / rel


__all__ = ["Trusted", "cache_file", "for_base", "head_config", "load_trusted", "shipped", "write_report"]
