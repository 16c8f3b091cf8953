"""Where and as whom a pull request's builder runs: a copy of the repository, a user, an interpreter.

A builder (``builder = "app/prompts.py:build_support"``) is Python code from the pull request. The
worker that runs it (:mod:`~needle_action.assemble.builder.worker`) is started here:

* **environment**: empty, apart from ``HOME`` (the copy), ``PATH`` and a UTF-8 locale: no
  ``*_KEY``, ``*_TOKEN``, ``GITHUB_*`` or anything else of ours; ``python -I`` ignores
  ``PYTHON*`` variables and the user site folder;
* **user**: when needle runs as root (the action's container), the worker runs as ``nobody`` (its
  own group, no supplementary groups), so it cannot read ``/proc/<pid>/environ`` of the process
  that holds the key, ``/root``, the runner's files, nor write into the checkout. As any other user
  it runs as that user: the limits and the empty environment hold, file isolation does not (see
  docs/security.md: capture in a job with no secrets);
* **working directory**: a temporary copy of the repository's visible files (no ``.git``, no hidden
  file the workspace does not allow, no symlink leading out), owned by the worker's user;
  the original checkout's ``.git`` folder is closed to other users while the run lasts (it may hold
  the checkout's token, and its path is no secret);
* **interpreter** (:func:`choose_python`): ``$NEEDLE_BUILDER_PYTHON``, else ``[files]
  builder_python`` (policy: the base branch's in the action), else the project's venv (``.venv/`` or
  ``venv/`` beside needle.toml; not in the action, where a pull request could plant one), else
  needle's own Python, else ``/usr/local/bin/python3.X`` or ``/usr/bin/python3.X``, the first the
  worker's user can execute; how it was chosen is said only when a builder's import fails; if
  none, the run stops with an error naming the fix (fail closed: never the builder as root);
* **network**: none. The worker takes it away itself before it imports the builder
  (:mod:`~needle_action.assemble.builder.guard`, whose source goes on its command line:
  :func:`worker_command`); running as ourselves, needle first makes its own process undumpable
  (:func:`shield_this_process`), so the worker cannot borrow needle's network through it;
* **dependencies**: in the action, the packages of a requirements file the base branch names are
  installed (:func:`install_requirements`) as the worker's user, with the same empty environment,
  into a private folder the worker puts at the end of its ``sys.path`` (:func:`site_folders`).
"""

from __future__ import annotations

import atexit
import contextlib
import glob
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from needle_action.core import environment
from needle_action.core.errors import ConfigError
from needle_action.core.paths import is_inside
from needle_action.core.workspace import Workspace

UNPRIVILEGED_USER = "nobody"
PYTHON_ENV = environment.BUILDER_PYTHON
MAX_COPY_BYTES = 200 * 1024 * 1024
MAX_COPY_FILES = 20_000
_SKIP_FOLDERS = {".git", "__pycache__", "node_modules", ".venv", "venv"}


@dataclass(frozen=True)
class RunAs:
    """The unprivileged identity a worker takes (None fields: run as ourselves)."""

    uid: int | None = None
    gid: int | None = None
    name: str = ""

    @property
    def drops(self) -> bool:
        return self.uid is not None


def run_as() -> RunAs:
    """``nobody`` when we are root, else ourselves."""
    if os.name != "posix" or os.geteuid() != 0:
        return RunAs()
    import pwd

    try:
        entry = pwd.getpwnam(UNPRIVILEGED_USER)
    except KeyError:
        raise ConfigError(
            f"builders run as the unprivileged user {UNPRIVILEGED_USER!r} when needle runs as root, "
            "and this system has no such user",
            hint=f"add the user (useradd {UNPRIVILEGED_USER}), or run needle as a non-root user",
        ) from None
    return RunAs(entry.pw_uid, entry.pw_gid, UNPRIVILEGED_USER)


# --------------------------------------------------------------------------- the interpreter


def _others_can(path: Path, who: RunAs, bits: int) -> bool:
    """Whether WHO (not root) gets BITS (``stat.S_IROTH | stat.S_IXOTH``...) on PATH by its mode."""
    st = path.stat()
    if st.st_uid == who.uid:
        return bool(st.st_mode & (bits << 6))
    if st.st_gid == who.gid:
        return bool(st.st_mode & (bits << 3))
    return bool(st.st_mode & bits)


def reachable(executable: str, who: RunAs) -> bool:
    """Whether WHO can execute EXECUTABLE: every folder on the way searchable, the file executable
    (symlinks followed, each target's folders checked too), and its standard library readable."""
    if not who.drops:
        return os.access(executable, os.X_OK)
    try:
        real = Path(executable).resolve(strict=True)
        folders = [*Path(os.path.abspath(executable)).parents, *real.parents]
        if not all(_others_can(p, who, stat.S_IXOTH) for p in folders):
            return False
        return _others_can(real, who, stat.S_IXOTH | stat.S_IROTH) or _others_can(real, who, stat.S_IXOTH)
    except OSError:
        return False


def _same_version_candidates() -> list[str]:
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    return [f"/usr/local/bin/{version}", f"/usr/bin/{version}"]


# a project's own virtual environment, looked for in the threshold file's folder
VENV_FOLDERS = (".venv", "venv")
SYSTEM = "system"  # ``[files] builder_python = "system"``: no project venv (the action's default)


@dataclass(frozen=True)
class BuilderPython:
    """The interpreter builders run with, how it was chosen (``why``) and what to do when the app's
    packages are not importable with it (``advice``): both said only when a builder's import fails."""

    path: str
    why: str
    advice: str


def _venv_advice(who: RunAs) -> str:
    user = f"user {who.name}" if who.drops else "this user"
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    return (
        f"give the builders a Python that has the app's packages and that {user} can run: a venv in "
        f"the repository (.venv/ or venv/ beside needle.toml) is used on its own; elsewhere, e.g. "
        f"`/usr/bin/{version} -m venv /opt/app-venv && /opt/app-venv/bin/pip install -r "
        f'requirements.txt`, then `[files] builder_python = "/opt/app-venv/bin/python"` in needle.toml '
        "(or $NEEDLE_BUILDER_PYTHON); in the action, the `requirements` input installs the base "
        "branch's requirements for the builders"
    )


def _closed_folder(executable: str, who: RunAs) -> Path | None:
    """The first folder on the way to EXECUTABLE (or its target) that WHO cannot enter."""
    try:
        real = Path(executable).resolve(strict=True)
    except OSError:
        return None
    for folder in [*reversed(Path(os.path.abspath(executable)).parents), *reversed(real.parents)]:
        with contextlib.suppress(OSError):
            if who.drops and not _others_can(folder, who, stat.S_IXOTH):
                return folder
    return None


def _unusable(path: str, who: RunAs, what: str) -> str:
    """Why WHO cannot run PATH, precisely."""
    user = f"user {who.name}" if who.drops else "this user"
    folder = _closed_folder(path, who)
    if folder is not None:
        return (
            f"{what} {path} is not usable by {user}: {folder} is closed to other users (mode "
            f"{stat.S_IMODE(folder.stat().st_mode):o}); builders never run as root"
        )
    return f"{what} {path} cannot be executed by {user}"


def _configured(setting: str, root: Path | None, who: RunAs) -> BuilderPython:
    """``[files] builder_python``: a path relative to the threshold file's folder, or absolute."""
    path = Path(setting) if Path(setting).is_absolute() or root is None else root / setting
    if not os.path.lexists(path):
        raise ConfigError(
            f"[files] builder_python names {setting}, which does not exist",
            hint="name the Python of a venv holding the app's packages (e.g. .venv/bin/python), or "
            "remove the key to let needle choose",
        )
    if not reachable(str(path), who):
        raise ConfigError(_unusable(str(path), who, "[files] builder_python,"), hint=_venv_advice(who))
    return BuilderPython(str(path), f"{path} ([files] builder_python)", _venv_advice(who))


def choose_python(who: RunAs, root: Path | None = None, setting: str | None = None) -> BuilderPython:
    """The builders' Python: $NEEDLE_BUILDER_PYTHON, else ``[files] builder_python`` (SETTING), else
    the project's venv in ROOT (unless SETTING is ``"system"``), else needle's own Python, else a
    system Python of the same version the user can run. Fails closed: never the builder as root."""
    override = environment.builder_python()
    if override:
        if not reachable(override, who):
            raise ConfigError(
                _unusable(override, who, f"${PYTHON_ENV},"),
                hint="point it at a Python in a folder every user can read, such as /usr/local/bin",
            )
        return BuilderPython(override, f"{override} (${PYTHON_ENV})", _venv_advice(who))
    if setting and setting != SYSTEM:
        return _configured(setting, root, who)
    advice, blocked = _venv_advice(who), None
    for folder in VENV_FOLDERS if root is not None and setting is None else ():
        venv = Path(root or ".") / folder / "bin" / "python"
        if os.path.lexists(venv):
            if reachable(str(venv), who):
                return BuilderPython(str(venv), f"the project's venv {venv}", advice)
            blocked = blocked or _unusable(str(venv), who, "the project's venv")
    if blocked:
        advice = f"{blocked}. {advice}"
    if reachable(sys.executable, who):
        return BuilderPython(sys.executable, f"needle's own Python ({sys.executable})", advice)
    for candidate in _same_version_candidates():
        if os.path.exists(candidate) and reachable(candidate, who):
            why = f"{candidate} as user {who.name}, " + _unusable(
                sys.executable, who, "since needle's own Python"
            )
            return BuilderPython(candidate, why, advice)
    raise ConfigError(
        f"builders run as user {who.name} (needle runs as root), who cannot execute needle's Python "
        f"({sys.executable}: a folder on its path is not readable by other users)",
        hint=f"install Python where every user can read it (/usr/local, as in the action's image), "
        f"or set ${PYTHON_ENV} to such an interpreter; builders never run as root",
    )


def interpreter(who: RunAs, root: Path | None = None, setting: str | None = None) -> tuple[str, str | None]:
    """(the Python the worker runs, how it was chosen when it is not needle's own)."""
    chosen = choose_python(who, root, setting)
    return chosen.path, None if chosen.path == sys.executable else chosen.why


# --------------------------------------------------------------------------- the copy


def _visible_files(workspace: Workspace) -> list[Path]:
    root = workspace.root
    out: list[Path] = []
    for folder, dirs, files in os.walk(root):
        here = Path(folder)
        dirs[:] = sorted(d for d in dirs if d not in _SKIP_FOLDERS and workspace.is_visible(here / d))
        for name in sorted(files):
            path = here / name
            if workspace.is_visible(path) and is_inside(root, path) and path.is_file():
                out.append(path)
    return out


def copy_repository(workspace: Workspace, who: RunAs) -> Path:
    """A temporary copy of the WORKSPACE's visible files, owned by WHO, removed at exit."""
    root = workspace.root
    files = _visible_files(workspace)
    total = sum(p.stat().st_size for p in files)
    if len(files) > MAX_COPY_FILES or total > MAX_COPY_BYTES:
        raise ConfigError(
            f"builders run in a copy of {root}, and it holds {len(files):,} files ({total // 2**20} MB): "
            f"more than the {MAX_COPY_FILES:,} files or {MAX_COPY_BYTES // 2**20} MB a copy may take",
            hint="put needle.toml (and the builder) in a smaller folder of the repository",
        )
    target = Path(tempfile.mkdtemp(prefix="needle-builder-"))
    atexit.register(shutil.rmtree, target, ignore_errors=True)
    for path in files:
        dest = target / path.relative_to(root)
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, dest)  # contents only: never the source's owner or mode bits
    if who.drops:
        assert who.uid is not None
        assert who.gid is not None
        for folder, _dirs, names in os.walk(target):
            os.chown(folder, who.uid, who.gid)
            for name in names:
                os.chown(os.path.join(folder, name), who.uid, who.gid)
    return target


_copies: dict[Workspace, Path] = {}
_copies_lock = threading.Lock()


def repository_copy(workspace: Workspace, who: RunAs) -> Path:
    """One copy per workspace for the whole run (every builder of a config shares it)."""
    key = workspace.resolved()
    with _copies_lock:
        if key not in _copies:
            _copies[key] = copy_repository(key, who)
        return _copies[key]


# --------------------------------------------------------------------------- the checkout's .git

_shielded: set[str] = set()


def _restore_mode(path: str, mode: int) -> None:
    with contextlib.suppress(OSError):  # removed meanwhile (a base worktree): nothing to restore
        os.chmod(path, mode)


def shield_git(root: Path) -> None:
    """Close the checkout's ``.git`` folder to other users while builders run (restored at exit).

    The worker works in a copy, but the original checkout's path is well known (``/github/workspace``)
    and ``.git/config`` may hold the checkout's token; as ``nobody`` the worker reads only what
    "other" may read, so the folder's group and other bits are cleared for the run."""
    for folder in (root, *root.parents):
        git = folder / ".git"
        if git.is_dir() and not git.is_symlink():  # a clone (a worktree's .git file: not followed)
            break
    else:
        return
    key = str(git)
    if key in _shielded:
        return
    mode = stat.S_IMODE(git.stat().st_mode)
    if mode & 0o077:
        os.chmod(git, mode & 0o700)
        atexit.register(_restore_mode, key, mode)
    _shielded.add(key)


# --------------------------------------------------------------------------- dependencies

INSTALL_SECONDS = 600
_sites: list[str] = []


def site_folders() -> list[str]:
    """The private folders of installed builder dependencies (appended to the worker's sys.path)."""
    return list(_sites)


def _pip(python: str, env: dict[str, str]) -> list[str]:
    """How PYTHON runs pip: its own module, else the pip wheel Debian ships (the action's image
    has a venv without pip; ``python path/pip.whl/pip`` runs it, so ``-I`` is replaced by ``-E -s``)."""
    probe = subprocess.run(  # noqa: S603 - fixed argv: the interpreter we chose, no user input
        [python, "-I", "-c", "import pip"], env=env, capture_output=True, timeout=60, check=False
    )
    if probe.returncode == 0:
        return [python, "-I", "-m", "pip"]
    wheels = sorted(glob.glob("/usr/share/python-wheels/pip-*.whl"))
    if wheels:
        return [python, "-E", "-s", wheels[-1] + "/pip"]
    raise ConfigError(
        f"the builders' Python ({python}) has no pip to install their requirements with",
        hint="install pip for that Python, or set $NEEDLE_BUILDER_PYTHON to one that has it",
    )


def install_requirements(text: str, name: str, who: RunAs, python: str) -> Path:
    """Install the requirements TEXT (the file NAME, for messages) for the builders: as WHO, with an
    environment that holds nothing of ours (install-time code of a package is as confined as a
    builder), ``--no-input``, into a private folder that later workers add to their ``sys.path``."""
    home = Path(tempfile.mkdtemp(prefix="needle-builder-site-"))
    atexit.register(shutil.rmtree, home, ignore_errors=True)
    (home / "requirements.txt").write_text(text, encoding="utf-8")
    if who.drops:
        assert who.uid is not None
        assert who.gid is not None
        os.chown(home, who.uid, who.gid)
        os.chown(home / "requirements.txt", who.uid, who.gid)
    env = worker_env(home)
    env["PIP_NO_INPUT"] = "1"
    target = home / "site"
    command = [
        *_pip(python, env),
        "install",
        "--no-input",
        "--no-cache-dir",
        "--disable-pip-version-check",
        "--no-warn-script-location",
        "--target",
        str(target),
        "-r",
        str(home / "requirements.txt"),
    ]
    drop: dict[str, Any] = {"user": who.uid, "group": who.gid, "extra_groups": []} if who.drops else {}
    try:
        proc = subprocess.run(  # noqa: S603 - fixed pip argv; the file is the base branch's
            command, env=env, cwd=home, capture_output=True, text=True, timeout=INSTALL_SECONDS, **drop
        )
    except subprocess.TimeoutExpired:
        raise ConfigError(
            f"installing the builders' requirements ({name}) took longer than {INSTALL_SECONDS} s",
            file=name,
        ) from None
    if proc.returncode != 0:
        tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-6:])
        raise ConfigError(
            f"installing the builders' requirements ({name}) failed:\n{tail}",
            file=name,
            hint="the base branch names this file; fix it there (pip install -r works the same locally)",
        )
    _sites.append(str(target))
    return target


# --------------------------------------------------------------------------- the process


def worker_env(home: Path) -> dict[str, str]:
    """Nothing of ours: the worker's whole environment."""
    return {
        "HOME": str(home),
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "LC_ALL": "C.UTF-8",
        "TMPDIR": str(home),
    }


def worker_command(python: str, settings: str) -> list[str]:
    """``python -I -c <worker.py's source> SETTINGS <guard.py's source>``: the worker
    reads none of needle's files, so the guard that takes its network away comes on the command line."""
    here = Path(__file__).parent
    source = (here / "worker.py").read_text(encoding="utf-8")
    guard = (here / "guard.py").read_text(encoding="utf-8")
    return [python, "-I", "-c", source, settings, guard]


def guard_report(python: str, who: RunAs) -> dict[str, Any]:
    """What the network guard achieves for a builder worker on this machine: the guard run alone
    (no builder) in a throwaway process of PYTHON as WHO. ``{"closed", "layers", "reason"}``."""
    source = (Path(__file__).parent / "guard.py").read_text(encoding="utf-8")
    code = source + "\nimport json as _json\nprint(_json.dumps(take_network_away('/')))\n"
    drop: dict[str, Any] = {"user": who.uid, "group": who.gid, "extra_groups": []} if who.drops else {}
    # our own guard's source, argv without a shell; PYTHON is the interpreter we chose
    proc = subprocess.run(  # noqa: S603
        [python, "-I", "-c", code],
        capture_output=True,
        text=True,
        env=worker_env(Path("/")),
        cwd="/",
        timeout=60,
        check=False,
        **drop,
    )
    try:
        report: dict[str, Any] = json.loads(proc.stdout)
    except ValueError:
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        return {"closed": False, "layers": [], "reason": f"the guard did not run: {tail}"}
    return report


def shield_this_process() -> None:
    """Make needle's own process undumpable (Linux) before a worker of the same user starts: no
    process of that user may then ptrace it, read or write its memory through ``/proc/<pid>/mem``,
    read its environment or take its descriptors (``pidfd_getfd``). needle holds the key and has
    the network; a builder running as the same user must not reach either through it. (As root the
    worker is ``nobody``, which may do none of that anyway.) Core dumps of needle are off after."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE, 0
    except (OSError, AttributeError):
        return  # no libc to call: the worker's own layers (Landlock, seccomp) still hold


def start_worker(python: str, settings: str, home: Path, who: RunAs) -> subprocess.Popen[bytes]:
    """The worker process (:func:`worker_command`) as WHO, with nothing of ours but its pipes."""
    drop: dict[str, Any] = {}
    if who.drops:
        drop = {"user": who.uid, "group": who.gid, "extra_groups": []}
    else:
        shield_this_process()
    # our own worker's source and settings, argv without a shell; PYTHON is the interpreter we chose
    return subprocess.Popen(  # noqa: S603
        worker_command(python, settings),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=worker_env(home),
        cwd=home,
        close_fds=True,
        start_new_session=True,
        **drop,
    )
