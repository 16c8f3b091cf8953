"""Main-branch results kept on a data branch, so a pull request finds its base already measured.

On a push to the default branch (input ``data-branch`` set) the head's results are committed to an
orphan branch of origin (``results/<sha>.json``, a ``results/<sha>.meta.json`` sidecar and
``results/latest.json``), the way python-coverage-comment-action keeps its data. A pull request run
fetches that branch (one commit deep) and, when ``results/<base_sha>.json`` is there, valid, and
measured under the same fingerprint, uses it as the base: no worktree, no model calls.

The fingerprint is the rule for "measured the way this PR's base would be": the sha256 of the
threshold file's bytes at that commit, plus the action inputs that change what is measured (seed,
trials, provider, recall) and the needle version. The push run hashes the file it measured with;
the PR run hashes the base commit's own file (``git cat-file``). Templates and fixtures need no hash:
they are fixed by the commit sha in the file name. A base without its own threshold file is measured
with the head's, so it never matches and is measured as before.

Every miss (no branch, no file, other fingerprint, corrupt JSON, git trouble) returns None and a
note; the caller measures the base as before. Nothing here fails the check.

Git runs with plumbing only (a private index file, ``commit-tree``, ``push <commit>:<branch>``), so
the workspace's checkout, index and config are never touched. The token reaches git as a one-shot
``http.<server>/.extraheader`` through ``GIT_CONFIG_COUNT`` variables: the same header
actions/checkout writes, but like ``git -c`` it lives only in that process, and unlike ``-c`` it is
not visible in the process list. It is never printed (and is masked in case git echoes it).
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from needle_action import __version__
from needle_action.compare import history
from needle_action.core import environment
from needle_action.core.errors import ConfigError
from needle_action.core.paths import relative_path
from needle_action.pullrequest.baseline import BaselineUnavailable, ensure_safe_directory
from needle_action.pullrequest.settings import Settings
from needle_action.results import Results

BOT_NAME = "github-actions[bot]"
BOT_EMAIL = "41898282+github-actions[bot]@users.noreply.github.com"
MAX_RESULTS_BYTES = history.MAX_RESULTS_BYTES
_BRANCH = re.compile(r"^(?!-)(?!.*\.\.)(?!.*//)[A-Za-z0-9._/-]+(?<![./])$")


class DataBranchError(Exception):
    """Git trouble with the data branch; the run goes on without it and says why."""


def check_branch_name(name: str) -> None:
    """A bad ``data-branch`` input is a usage error (exit 2), found before anything is measured."""
    if not _BRANCH.match(name) or name.endswith(".lock"):
        raise ConfigError(
            f"input `data-branch` is not a valid branch name: {name!r}",
            file="action inputs",
            hint="use letters, digits, '.', '_', '-' and '/', e.g. `data-branch: needle-action-data`",
        )


def is_default_branch_push(settings: Settings) -> bool:
    default = (settings.event.get("repository") or {}).get("default_branch")
    return settings.event_name == "push" and bool(default) and settings.ref == f"refs/heads/{default}"


def fingerprint(config_bytes: bytes, settings: Settings) -> dict[str, Any]:
    return {
        "config_sha256": hashlib.sha256(config_bytes).hexdigest(),
        "inputs": {
            "seed": settings.seed,
            "trials": settings.trials,
            "provider": settings.provider,
            "recall": settings.recall,
        },
        "needle_version": __version__,
    }


# --------------------------------------------------------------------------- git


def _env(settings: Settings, **extra: str) -> dict[str, str]:
    env = {**environment.process(), "GIT_TERMINAL_PROMPT": "0", **extra}
    if settings.github_token:
        basic = base64.b64encode(f"x-access-token:{settings.github_token}".encode()).decode()
        settings.notices.mask(basic)
        key = f"http.{settings.server_url.rstrip('/')}/.extraheader"
        # the empty value first drops a header actions/checkout may have persisted (two would clash)
        env.update(
            GIT_CONFIG_COUNT="2",
            GIT_CONFIG_KEY_0=key,
            GIT_CONFIG_VALUE_0="",
            GIT_CONFIG_KEY_1=key,
            GIT_CONFIG_VALUE_1=f"AUTHORIZATION: basic {basic}",
        )
    return env


def _git(
    args: list[str], cwd: Path, env: dict[str, str], *, check: bool = True, input: bytes | None = None
) -> subprocess.CompletedProcess[bytes]:
    # git from PATH with a fixed argv (no shell); the path is the runner's choice
    proc = subprocess.run(  # noqa: S603
        ["git", *args],  # noqa: S607
        cwd=str(cwd),
        env=env,
        input=input,
        capture_output=True,
        timeout=300,
    )
    if check and proc.returncode != 0:
        raise DataBranchError(f"git {' '.join(args[:2])} failed: {_err(proc)}")
    return proc


def _err(proc: subprocess.CompletedProcess[bytes]) -> str:
    return proc.stderr.decode("utf-8", "replace").strip()[:300]


def _out(proc: subprocess.CompletedProcess[bytes]) -> str:
    return proc.stdout.decode("utf-8", "replace").strip()


def fetch_tip(workspace: Path, branch: str, env: dict[str, str]) -> str | None:
    """The data branch's tip on origin (fetched one commit deep), or None when it does not exist."""
    proc = _git(
        ["fetch", "--no-tags", "--depth=1", "origin", f"refs/heads/{branch}"], workspace, env, check=False
    )
    if proc.returncode != 0:
        if "couldn't find remote ref" in _err(proc).lower():
            return None
        raise DataBranchError(f"could not fetch `{branch}` from origin: {_err(proc)}")
    return _out(_git(["rev-parse", "--verify", "FETCH_HEAD^{commit}"], workspace, env))


def read_blob(workspace: Path, rev: str, path: str, env: dict[str, str]) -> bytes | None:
    proc = _git(["cat-file", "blob", f"{rev}:{path}"], workspace, env, check=False)
    return proc.stdout if proc.returncode == 0 else None


# --------------------------------------------------------------------------- push: store


def store(settings: Settings, results: Results, config_bytes: bytes, *, attempts: int = 3) -> str:
    """Commit RESULTS to the data branch and push it; returns the pushed commit. Raises DataBranchError."""
    ws, branch, sha = settings.workspace, settings.data_branch, results.commit
    if not branch or not sha:
        raise DataBranchError("no data branch or no commit sha to store results under")
    env = _env(settings)
    meta = {"commit": sha, "fingerprint": fingerprint(config_bytes, settings)}
    body = results.model_dump_json(indent=2).encode()
    files = {
        f"results/{sha}.json": body,
        f"results/{sha}.meta.json": json.dumps(meta, indent=2).encode(),
        "results/latest.json": body,
    }
    bot = {
        "GIT_AUTHOR_NAME": BOT_NAME,
        "GIT_AUTHOR_EMAIL": BOT_EMAIL,
        "GIT_COMMITTER_NAME": BOT_NAME,
        "GIT_COMMITTER_EMAIL": BOT_EMAIL,
    }
    for _ in range(attempts):  # another main-branch run may push in between: rebuild on its tip
        parent = fetch_tip(ws, branch, env)
        # the history's order, appended to (never rewritten): `needle history` and the PR comment's
        # trend read it from the tip alone, which is all a one-commit-deep fetch has
        files[history.INDEX] = _appended(read_blob(ws, parent, history.INDEX, env) if parent else None, sha)
        with tempfile.TemporaryDirectory(prefix="needle-data-") as tmp:
            idx = {**env, "GIT_INDEX_FILE": str(Path(tmp) / "index")}  # never the workspace's index
            _git(["read-tree", parent] if parent else ["read-tree", "--empty"], ws, idx)
            for name, data in files.items():
                blob = _out(_git(["hash-object", "-w", "--stdin"], ws, idx, input=data))
                _git(["update-index", "--add", "--cacheinfo", f"100644,{blob},{name}"], ws, idx)
            tree = _out(_git(["write-tree"], ws, idx))
        commit = _out(
            _git(
                ["commit-tree", tree, *(["-p", parent] if parent else []), "-m", f"needle results for {sha}"],
                ws,
                {**env, **bot},
            )
        )
        push = _git(["push", "--quiet", "origin", f"{commit}:refs/heads/{branch}"], ws, env, check=False)
        if push.returncode == 0:
            return commit
        if not re.search(r"rejected|non-fast-forward|fetch first|stale info", _err(push)):
            raise DataBranchError(
                f"could not push `{branch}`: {_err(push)} (the job needs `permissions: contents: write`)"
            )
    raise DataBranchError(f"could not push `{branch}`: it kept moving ({attempts} attempts)")


def _appended(index: bytes | None, sha: str) -> bytes:
    commits = history.read_index(index)
    if sha not in commits:  # a rerun for the same commit replaces its results, keeps its place
        commits.append(sha)
    return json.dumps([{"commit": c} for c in commits], indent=1).encode()


def store_or_explain(settings: Settings, results: Results) -> str:
    """``store`` for the run loop: a note for the summary; a warning, never a failure, on trouble."""

    try:
        ensure_safe_directory(settings.workspace, force=settings.in_actions)  # a container's bind mount
        commit = store(settings, results, settings.config_path.read_bytes())
    except (DataBranchError, BaselineUnavailable, OSError, subprocess.SubprocessError) as exc:
        settings.notices.warn(f"results not stored on the data branch: {exc}")
        return f"Results not stored on the data branch `{settings.data_branch}`: {exc}."
    print(f"stored results/{results.commit}.json on `{settings.data_branch}` ({commit[:12]})", flush=True)
    return f"Results stored on the data branch `{settings.data_branch}` as `results/{results.commit}.json`."


# --------------------------------------------------------------------------- pull request: load


def _base_config_bytes(ws: Path, base_sha: str, rel: str, env: dict[str, str]) -> bytes | None:
    """The base commit's own threshold file; fetches the commit (one deep) when the clone lacks it."""
    if _git(["cat-file", "-e", f"{base_sha}^{{commit}}"], ws, env, check=False).returncode != 0:
        _git(["fetch", "--no-tags", "--depth=1", "origin", base_sha], ws, env)
    return read_blob(ws, base_sha, rel, env)


def _parse_stored(raw: bytes, base_sha: str) -> Results:
    """Stored results validated like any results file (ConfigError when they are not)."""
    return history.parse_results(raw, f"results/{base_sha}.json")


def load_base(settings: Settings, base_sha: str) -> tuple[Results | None, str]:
    """The base's results from the data branch, or (None, why not). Never raises for a miss."""
    branch = settings.data_branch
    if branch is None:
        return None, "No data branch configured."
    miss = "the base was measured instead"
    try:
        env = _env(settings)
        ws = settings.workspace
        tip = fetch_tip(ws, branch, env)
        if tip is None:
            return None, f"Data branch `{branch}` not found on origin; {miss}."
        raw = read_blob(ws, tip, f"results/{base_sha}.json", env)
        if raw is None:
            return None, f"No results for the base {base_sha[:12]} on the data branch `{branch}`; {miss}."
        try:
            meta = json.loads(read_blob(ws, tip, f"results/{base_sha}.meta.json", env) or b"")
        except ValueError:
            meta = {}
        rel = relative_path(ws, settings.config_path, resolved=True)
        if rel is None:
            return None, f"The threshold file is outside the workspace; {miss}."
        config_bytes = _base_config_bytes(ws, base_sha, rel, env)
        if config_bytes is None:
            return None, f"The base has no `{rel}`, so its stored results cannot match; {miss}."
        if not isinstance(meta, dict) or meta.get("fingerprint") != fingerprint(config_bytes, settings):
            return None, (
                f"The data branch's results for the base {base_sha[:12]} were measured with another "
                f"threshold file, inputs or needle version; {miss}."
            )
        if len(raw) > MAX_RESULTS_BYTES:
            return None, f"The data branch's results for the base are implausibly large; {miss}."
        try:
            results = _parse_stored(raw, base_sha)
        except ConfigError as exc:
            return None, f"The data branch's results for the base are invalid ({exc.message}); {miss}."
        if results.commit != base_sha:
            return None, f"The data branch's results for the base name another commit; {miss}."
    except (DataBranchError, OSError, subprocess.SubprocessError) as exc:
        return None, f"Could not read the data branch `{branch}` ({exc}); {miss}."
    return (
        results,
        f"Base results for {base_sha[:12]} read from the data branch `{branch}` (not measured again).",
    )


def load_history(settings: Settings) -> tuple[list[Results], str | None]:
    """The main-branch results on the data branch, oldest first (its ``results/index.json``), or
    ([], why not). Never raises: the trend is a picture, not a check."""
    branch = settings.data_branch
    if branch is None:
        return [], None
    try:
        env = _env(settings)
        tip = fetch_tip(settings.workspace, branch, env)
        if tip is None:
            return [], None
        shas = history.read_index(read_blob(settings.workspace, tip, history.INDEX, env))
        runs = []
        for sha in shas[-history.TREND_POINTS :]:
            raw = read_blob(settings.workspace, tip, f"results/{sha}.json", env)
            if raw is not None:
                runs.append(history.parse_results(raw, f"{branch}:results/{sha}.json"))
    except (DataBranchError, ConfigError, OSError, subprocess.SubprocessError) as exc:
        return [], f"The trend could not be read from the data branch `{branch}` ({exc})."
    return runs, None
