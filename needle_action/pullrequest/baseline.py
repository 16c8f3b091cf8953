"""The base side of a pull request: a detached ``git worktree`` of the base commit, measured with
the same pipeline as the head.

Which threshold file measures the base? The base's own ``needle.toml`` when it has one: the base
is judged by the rules it was written under, and a PR cannot make its base look worse by editing
the config. When the base has none (the PR that adopts needle), the head's file is applied to the
base's templates; if that does not load there either (templates or fixtures the base lacks), there
is no baseline and every prompt is judged on its own. See docs/decisions.md.

Containers: the workspace is bind-mounted and owned by another uid, so git refuses to work in it
("detected dubious ownership"). We add it to ``safe.directory`` (globally, as actions/checkout
does) when running inside Actions, or when git reports that error.
"""

from __future__ import annotations

import contextlib
import re
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

from needle_action.config import load_config
from needle_action.config.model import Config
from needle_action.core.errors import NeedleError
from needle_action.core.paths import relative_path
from needle_action.results import Results

DUBIOUS = "dubious ownership"


class BaselineUnavailable(Exception):
    """The base cannot be measured; the run goes on without a baseline and says why."""


def git(
    args: list[str], cwd: Path, *, check: bool = True, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(["git", *args], cwd=str(cwd), capture_output=True, text=True, timeout=timeout)  # noqa: S603, S607 - git from PATH with a fixed argv (no shell); the path is the runner's choice
    if check and proc.returncode != 0:
        raise BaselineUnavailable(f"git {' '.join(args[:3])} failed: {proc.stderr.strip()[:300]}")
    return proc


def ensure_safe_directory(workspace: Path, *, force: bool = False) -> bool:
    """Make git trust WORKSPACE; True when we had to add it to safe.directory."""
    probe = git(["rev-parse", "--git-dir"], workspace, check=False)
    if probe.returncode == 0 and not force:
        return False
    if probe.returncode != 0 and DUBIOUS not in probe.stderr and not force:
        raise BaselineUnavailable(f"not a git repository: {workspace} ({probe.stderr.strip()[:200]})")
    existing = git(
        ["config", "--global", "--get-all", "safe.directory"], workspace, check=False
    ).stdout.split()
    if str(workspace) not in existing:
        git(["config", "--global", "--add", "safe.directory", str(workspace)], workspace)
    git(["rev-parse", "--git-dir"], workspace)  # raises if git still refuses
    return True


def has_commit(workspace: Path, sha: str) -> bool:
    return git(["cat-file", "-e", f"{sha}^{{commit}}"], workspace, check=False).returncode == 0


def is_shallow(workspace: Path) -> bool:
    return git(["rev-parse", "--is-shallow-repository"], workspace, check=False).stdout.strip() == "true"


def resolve_commit(workspace: Path, ref: str) -> str:
    """A sha for REF (sha, branch, tag, origin/branch), fetching it from origin when missing."""
    for candidate in (ref, f"origin/{ref}"):
        proc = git(["rev-parse", "--verify", "--quiet", f"{candidate}^{{commit}}"], workspace, check=False)
        if proc.returncode == 0:
            return proc.stdout.strip()
    fetch_commit(workspace, ref)
    proc = git(["rev-parse", "--verify", "--quiet", "FETCH_HEAD^{commit}"], workspace, check=False)
    if proc.returncode != 0:
        raise BaselineUnavailable(f"base ref {ref!r} not found locally or on origin")
    return proc.stdout.strip()


def fetch_commit(workspace: Path, ref: str) -> None:
    """``git fetch --depth=1 origin REF``: actions/checkout clones one commit deep by default."""
    proc = git(["fetch", "--no-tags", "--depth=1", "origin", ref], workspace, check=False)
    if proc.returncode != 0:
        raise BaselineUnavailable(
            f"could not fetch the base commit {ref} from origin: {proc.stderr.strip()[:300]} "
            "(use actions/checkout with fetch-depth: 0, or persist-credentials for private repositories)"
        )


def ensure_commit(workspace: Path, sha: str) -> None:
    if has_commit(workspace, sha):
        return
    fetch_commit(workspace, sha)
    if not has_commit(workspace, sha):
        raise BaselineUnavailable(f"base commit {sha} is still missing after fetching it")


_HUNK = re.compile(r"^@@ -\d+(?:,\d+)? \+(\d+)(?:,(\d+))? @@", re.M)


def first_changed_line(workspace: Path, base_sha: str, path: str) -> int | None:
    """First line of PATH (relative to the repository) that differs from BASE_SHA, for annotations."""
    proc = git(["diff", "-U0", "--no-color", "--no-ext-diff", base_sha, "--", path], workspace, check=False)
    if proc.returncode != 0:
        return None
    m = _HUNK.search(proc.stdout)
    return max(1, int(m.group(1))) if m else None


@contextlib.contextmanager
def base_worktree(workspace: Path, sha: str, *, parent: Path | None = None) -> Iterator[Path]:
    """A detached checkout of SHA in a temporary folder, removed afterwards."""
    tmp = Path(tempfile.mkdtemp(prefix="needle-base-", dir=str(parent) if parent else None))
    tree = tmp / "base"
    git(["worktree", "add", "--detach", "--force", str(tree), sha], workspace)
    try:
        yield tree
    finally:
        git(["worktree", "remove", "--force", str(tree)], workspace, check=False)
        git(["worktree", "prune"], workspace, check=False)
        shutil.rmtree(tmp, ignore_errors=True)


def base_config_path(tree: Path, head_config: Path, workspace: Path) -> tuple[Path, str]:
    """The threshold file to measure the base with, and where it came from ("base" or "head")."""
    rel = relative_path(workspace, head_config, resolved=True)
    if rel is None:
        raise BaselineUnavailable(f"the threshold file {head_config} is outside the workspace")
    own = tree / rel
    if own.is_file():
        return own, "base"
    own.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(head_config, own)
    return own, "head"


@contextlib.contextmanager
def base_side(
    workspace: Path, sha: str, head_config: Path, *, temp_parent: Path | None = None
) -> Iterator[tuple[Config, str]]:
    """Check out SHA and load its threshold file (or the head's): yields (config, note about which
    file was used) while the checkout exists, so the base can be measured together with the head.
    Raises BaselineUnavailable."""

    ensure_commit(workspace, sha)
    with base_worktree(workspace, sha, parent=temp_parent) as tree:
        cfg_path, origin = base_config_path(tree, head_config, workspace)
        try:
            config = load_config(cfg_path)
        except NeedleError as exc:
            where = "its own threshold file" if origin == "base" else "the head's threshold file"
            raise BaselineUnavailable(f"the base could not be loaded with {where}: {exc.message}") from None
        yield (
            config,
            "" if origin == "base" else "The base has no threshold file: it was measured with the head's.",
        )


def measure_base(
    workspace: Path,
    sha: str,
    head_config: Path,
    measure: Callable[[Config], Results],
    *,
    temp_parent: Path | None = None,
) -> tuple[Results, str]:
    """Check out SHA, load its threshold file (or the head's) and run MEASURE(config) on it.

    Returns (results, note about which config was used). Raises BaselineUnavailable.
    """
    with base_side(workspace, sha, head_config, temp_parent=temp_parent) as (config, note):
        try:
            results = measure(config)
        except NeedleError as exc:
            raise BaselineUnavailable(f"the base could not be measured: {exc.message}") from None
        results.commit = sha
        return results, note
