"""Builders for what tests put on disk: needle projects and git repositories.

One place to write a temporary project (``needle.toml``, templates, fixtures, any other file) and
to make real git history, so that tests say *what* they need rather than *how* to lay it out::

    project = (
        Project(tmp_path / "repo")
        .template("prompts/qa.j2", "user:\\n{{ notes }}\\n{{ question }}\\n")
        .fixture("fixtures/qa.yaml", {"notes": "The depot opens at nine.", "question": "When?"})
        .config('''
            [prompts.qa]
            template = "prompts/qa.j2"
            fixtures = ["fixtures/qa.yaml"]
        ''')
    )
    load_config(project.config_path)

    repo = GitRepo.init(tmp_path / "origin")        # real git, fixed identity, no system config
    Project(repo.path).examples().config(CONFIG)    # the bundled examples' prompts and fixtures
    base = repo.commit("base")                      # `git add -A` + commit; returns the sha

    pr = pull_request(tmp_path, base=..., change=...)  # origin with main + feature, a depth-1 clone

Every writer makes the parent folders, writes UTF-8 (lone surrogates from ``"\\udcff"`` become the
raw byte, for tests of files that are not valid UTF-8) and returns the builder, so calls chain.
Nothing here asserts anything about needle itself: builders only lay out inputs.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import textwrap
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml

REPO_ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = REPO_ROOT / "examples"


# --------------------------------------------------------------------------- files and projects


def write(root: Path, rel: str, text: str, *, dedent: bool = False) -> Path:
    """Write TEXT to ROOT/REL (parents made) and return the path. ``dedent``: strip the common
    indentation and the leading newline, for text written as an indented triple-quoted string."""
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    if dedent:
        text = textwrap.dedent(text).lstrip("\n")
    path.write_bytes(text.encode("utf-8", "surrogateescape"))
    return path


def prompt_table(
    name: str, template: str, fixture: str, context: str, question: str, max_tokens: int | None
) -> str:
    """The ``[prompts.NAME]`` table of a needle.toml: TEMPLATE, one FIXTURE, the CONTEXT and
    QUESTION variables, and ``max_input_tokens`` MAX_TOKENS (left out when None)."""
    lines = [f"[prompts.{name}]", f'template = "{template}"', f'fixtures = ["{fixture}"]']
    lines += [f'context_var = "{context}"', f'question_var = "{question}"']
    lines += [f"max_input_tokens = {max_tokens}"] if max_tokens is not None else []
    return "\n".join([*lines, ""])


def builder_project(root: Path, module: str, source: str, names: Sequence[str], fixture: str) -> None:
    """A needle project under ROOT whose prompts NAMES are built by functions of the same names in
    MODULE (a path like ``app/net.py``, written with SOURCE), all from one ``fixture.yaml``."""
    write(root, module, source)
    write(root, "fixture.yaml", fixture)
    tables = "".join(
        f'[prompts.{name}]\nbuilder = "{module}:{name}"\nfixtures = ["fixture.yaml"]\n\n' for name in names
    )
    write(root, "needle.toml", tables + "[files]\nbuilders = true\n")


class Project:
    """A needle project under ROOT (created if missing). Each method writes and returns ``self``."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)

    @property
    def config_path(self) -> Path:
        """The default threshold file, ``ROOT/needle.toml`` (whether or not it exists yet)."""
        return self.root / "needle.toml"

    def path(self, rel: str) -> Path:
        return self.root / rel

    def file(self, rel: str, text: str, *, dedent: bool = False) -> Project:
        """Any file: a README, filler documents, a partial, a file that is not valid UTF-8."""
        write(self.root, rel, text, dedent=dedent)
        return self

    def files(self, files: Mapping[str, str]) -> Project:
        """Several files at once: ``{relative path: text}``."""
        for rel, text in files.items():
            self.file(rel, text)
        return self

    def template(self, rel: str, text: str, *, dedent: bool = False) -> Project:
        """A prompt template (Jinja2 ``.j2``/``.jinja``, ``.prompty``) at REL."""
        return self.file(rel, text, dedent=dedent)

    def fixture(self, rel: str, data: str | Mapping, *, dedent: bool = False) -> Project:
        """A fixture: text as given, or a mapping serialised by REL's suffix (``.json``; ``.yaml``
        or ``.yml``)."""
        if isinstance(data, Mapping):
            suffix = Path(rel).suffix
            if suffix == ".json":
                data = json.dumps(data)
            elif suffix in (".yaml", ".yml"):
                data = yaml.safe_dump(dict(data), sort_keys=False)
            else:
                raise ValueError(f"fixture {rel}: give text for a {suffix or 'suffix-less'} file")
        return self.file(rel, data, dedent=dedent)

    def config(self, toml: str, *, name: str = "needle.toml", dedent: bool = True) -> Project:
        """The threshold file (``needle.toml`` unless NAME), dedented by default."""
        return self.file(name, toml, dedent=dedent)

    def link(self, rel: str, target: Path) -> Project:
        """A symlink at REL pointing at TARGET (for tests of paths that escape the root)."""
        path = self.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        os.symlink(target, path)
        return self

    def examples(self, *parts: str) -> Project:
        """Copy the bundled examples/ into the project: only PARTS (e.g. ``"prompts", "fixtures"``)
        or, with none, all of it, ``needle.toml`` included (caches and bytecode left out)."""
        ignore = shutil.ignore_patterns(".needle-cache", "__pycache__")
        if not parts:
            shutil.copytree(EXAMPLES, self.root, ignore=ignore, dirs_exist_ok=True)
        for part in parts:
            src = EXAMPLES / part
            if src.is_dir():
                shutil.copytree(src, self.root / part, ignore=ignore, dirs_exist_ok=True)
            else:
                shutil.copy2(src, self.root / part)
        return self

    def edit(self, rel: str, old: str, new: str, *, count: int = -1) -> Project:
        """Replace OLD with NEW in REL. OLD must be there: an edit that silently matches nothing
        would leave the test checking the unedited project."""
        path = self.root / rel
        text = path.read_text(encoding="utf-8")
        if old not in text:
            raise AssertionError(f"{rel} does not contain {old!r}: the file changed shape")
        path.write_text(text.replace(old, new, count), encoding="utf-8")
        return self


# --------------------------------------------------------------------------- git

# A fixed identity and no system config, so runs are reproducible on any machine.
IDENTITY = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.com",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.com",
    "GIT_CONFIG_NOSYSTEM": "1",
}


def git(cwd: Path, *args: str) -> str:
    """Run real git in CWD with the test identity; its stdout, stripped. Fails on a non-zero exit."""
    env = {**os.environ, **IDENTITY}
    return subprocess.run(
        ["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True
    ).stdout.strip()


@dataclass(frozen=True)
class GitRepo:
    """A real git repository (work tree or bare) at PATH."""

    path: Path

    @classmethod
    def init(cls, path: Path, *, branch: str = "main") -> GitRepo:
        path.mkdir(parents=True, exist_ok=True)
        git(path, "init", "-q", "-b", branch)
        return cls(path)

    def git(self, *args: str) -> str:
        return git(self.path, *args)

    def commit(self, message: str) -> str:
        """Stage everything (``git add -A``), commit, and return the new commit's sha."""
        self.git("add", "-A")
        self.git("commit", "-q", "-m", message)
        return self.sha()

    def sha(self, rev: str = "HEAD") -> str:
        return self.git("rev-parse", rev)

    def checkout(self, branch: str, *, new: bool = False) -> GitRepo:
        self.git("checkout", "-q", *(["-b"] if new else []), branch)
        return self

    def clone(
        self, dest: Path, *, branch: str | None = None, depth: int | None = None, bare: bool = False
    ) -> GitRepo:
        """Clone over ``file://`` (so ``depth`` really makes a shallow clone, as actions/checkout does)."""
        args = ["clone", "-q"]
        if bare:
            args.append("--bare")
        if depth is not None:
            args.append(f"--depth={depth}")
        if branch is not None:
            args += ["--branch", branch]
        git(dest.parent, *args, self.path.as_uri(), str(dest))
        return GitRepo(dest)


@dataclass(frozen=True)
class PullRequest:
    """What a pull_request run sees: ORIGIN has the base commit on ``main`` and the PR's head on
    ``feature``; WORKSPACE is a one-commit-deep clone of ``feature``, like actions/checkout makes,
    so anything that needs the base has to fetch it."""

    origin: Path
    workspace: Path
    base_sha: str
    head_sha: str


def pull_request(
    tmp: Path,
    base: Callable[[Project], object],
    change: Callable[[Project], object] | None = None,
) -> PullRequest:
    """Build ``tmp/origin`` (BASE lays out main's files, committed as "base"; CHANGE edits them on
    ``feature``, committed as "the pull request") and clone ``tmp/workspace`` from it."""
    origin = GitRepo.init(tmp / "origin")
    project = Project(origin.path)
    base(project)
    base_sha = origin.commit("base")
    origin.checkout("feature", new=True)
    if change is not None:
        change(project)
    head_sha = origin.commit("the pull request")
    workspace = origin.clone(tmp / "workspace", branch="feature", depth=1)
    return PullRequest(origin.path, workspace.path, base_sha, head_sha)
