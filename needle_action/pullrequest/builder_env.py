"""Prompts built in code, in the action: captured requests, and the builders' own dependencies.

Two inputs, both about ``builder = "file.py:function"`` prompts (docs/security.md, "Prompt
builders"):

* ``requests``: the two-job pattern. A job with no secret ran ``needle capture`` and uploaded the
  folder; this job downloads it and measures the head's builder prompts from it, running no code of
  the pull request (:func:`head_side`). The base's builder prompts are left out of a base measured
  here (:func:`base_side`): no builder runs in a job that holds the key. A base stored on the data
  branch (measured on a push) keeps them.
* ``requirements``: a requirements file of the builders' dependencies, when builders run in this
  job. Its *contents* come from the base commit (a pull request cannot add a package that runs at
  install time next to the key), and it is installed only when the policy in force enables
  builders (the base's ``[files] builders``; a head whose builder prompts were left out installs
  nothing), as the builders' unprivileged user with an empty environment, into a private folder on
  the builders' ``sys.path`` (:func:`~needle_action.assemble.builder.sandbox.install_requirements`).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from needle_action.assemble.builder import sandbox as builder_sandbox
from needle_action.config.model import Config
from needle_action.config.trust import without_builders
from needle_action.core.errors import ConfigError
from needle_action.core.paths import PathEscape, check_relative, read_text
from needle_action.pipeline.capture import measuring_captured
from needle_action.pullrequest.baseline import git
from needle_action.pullrequest.settings import Settings

MAX_REQUIREMENTS_BYTES = 1_000_000


def built_in_code(config: Config) -> list[str]:
    """The prompts of CONFIG built in code."""
    return [name for name, p in config.prompts.items() if p.builder is not None]


@contextmanager
def head_side(settings: Settings, config: Config, base_sha: str | None, notes: list[str]) -> Iterator[Config]:
    """CONFIG (the head's, trust applied) as its builder prompts are measured in this job: from the
    captured requests when the ``requests`` input names them, else by their builders, with the
    base's requirements installed first."""
    if not built_in_code(config):
        if settings.requests is not None:
            notes.append(
                "The `requests` input was not used: no prompt built in code is measured in this run "
                "(builders are enabled by the base branch's `[files] builders = true`)."
            )
        yield config
        return
    if settings.requests is not None:
        with measuring_captured(config, settings.requests, settings.measure.overrides) as replayed:
            yield replayed
        return
    if settings.requirements:
        _install(settings, settings.requirements, base_sha, notes, config)
    yield config


def base_side(settings: Settings, config: Config, notes: list[str]) -> Config:
    """The base's CONFIG as measured in this job: without its builder prompts under ``requests``."""
    if settings.requests is None:
        return config
    kept, dropped = without_builders(config.prompts)
    if dropped:
        names = ", ".join(name for name, _ in dropped)
        notes.append(
            f"The base's prompts built in code ({names}) were not measured: with the `requests` input "
            "no builder runs in this job, so their head cases are judged on their own (a data branch "
            "keeps main's results to compare with)."
        )
    return config.model_copy(update={"prompts": kept})


def _requirements_text(settings: Settings, rel: str, base_sha: str | None) -> str | None:
    """The file's text at the base commit (a pull request), or in the checkout (no pull request:
    the commit measured is the branch's own); None when it is not there."""
    if base_sha is not None:
        proc = git(["cat-file", "blob", f"{base_sha}:{rel}"], settings.workspace, check=False, timeout=60)
        if proc.returncode != 0:
            return None
        if len(proc.stdout) > MAX_REQUIREMENTS_BYTES:
            raise ConfigError(f"the builders' requirements file {rel} is too large", file=rel)
        return proc.stdout
    path = settings.workspace / rel
    if not path.is_file() or path.is_symlink():
        return None
    return read_text(path, what="the requirements file", file=rel, max_bytes=MAX_REQUIREMENTS_BYTES)


def _install(
    settings: Settings, rel: str, base_sha: str | None, notes: list[str], config: Config | None = None
) -> None:
    try:
        check_relative(rel)
    except PathEscape:
        raise ConfigError(
            f"input `requirements` must be a path inside the repository, got {rel!r}",
            file="action inputs",
        ) from None
    text = _requirements_text(settings, rel, base_sha)
    if text is None:
        where = f"the base commit {base_sha[:12]}" if base_sha else "the checkout"
        notes.append(f"The builders' requirements were not installed: {rel} is not in {where}.")
        return
    who = builder_sandbox.run_as()
    # the Python the builders will run with (the base's [files] builder_python, trust applied)
    files = config.files if config is not None else None
    root = config.root if config is not None else None
    python = builder_sandbox.choose_python(who, root, files.builder_python if files else "system").path
    builder_sandbox.install_requirements(text, rel, who, python)
    notes.append(f"The builders' requirements ({rel}, as of the base) were installed for them.")


__all__ = ["base_side", "built_in_code", "head_side"]
