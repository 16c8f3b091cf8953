"""``needle capture`` and ``needle check --requests DIR``: builders run in one job, measured in another.

A builder is pull request code. :mod:`~needle_action.assemble.builder.client` already runs it without a
secret; capture goes one step further and lets a workflow keep the key and the code in different
jobs: ``needle capture`` (a job with no secrets) runs every builder over its fixtures and over every
recall trial input the configured seed plans, and writes what each call returned to a folder; a
later job measures those requests with ``needle check --requests DIR`` and runs no code at all.

The folder::

    manifest.json        {"format": 1, "needle_version", "config_hash", "seeds": {prompt: seed},
                          "prompts": {prompt: {"builder", "calls"}}}
    requests/NAME.jsonl  one {"key": <call key>, "body": <what the builder returned>} per line

A call is filed under :func:`~needle_action.assemble.builder.client.call_key` (the prompt's name and its
keyword arguments), which is how the measuring run finds it again: recall builds the same trial
inputs from the same seed. The config hash covers the threshold file, every builder prompt's
fixtures and its module; a folder captured with another config, seed or needle version is an error,
not a silent mix. The folder comes from a job that ran pull request code: it is read as untrusted
data (size caps, no symlinks, JSON only, and every body checked as a request when it is measured).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from needle_action import __version__
from needle_action.assemble.builder import client as builders
from needle_action.assemble.render import render_case
from needle_action.config.model import Config, PromptConfig
from needle_action.core.dataformats import DataError, parse_json
from needle_action.core.errors import ConfigError
from needle_action.core.paths import display_path, read_text
from needle_action.recall.plan.prompt import RecallOverrides, context_window, effective_prompt, skip_reason
from needle_action.recall.run.cells import CellRun
from needle_action.recall.run.prebuild import every_trial
from needle_action.recall.run.scheduler import PromptPlan, trial_needles
from needle_action.recall.trials.haystack import HaystackBuilder
from needle_action.stats.power import plan_for
from needle_action.tokens import get_counter

FORMAT = 1
MANIFEST = "manifest.json"
MAX_MANIFEST_BYTES = 1_000_000
MAX_REQUESTS_BYTES = 512 * 1024**2


def builder_prompts(config: Config, only: list[str] | None = None) -> list[PromptConfig]:
    """The prompts built in code (of ONLY, when given)."""
    return [p for name, p in config.prompts.items() if p.builder is not None and (not only or name in only)]


def config_hash(config: Config) -> str:
    """A digest of what decides the builders' inputs and outputs: the threshold file, and each builder
    prompt's fixtures and module."""
    h = hashlib.sha256()
    files = [config.path]
    for prompt in builder_prompts(config):
        files.extend(config.fixture_paths(prompt))
        files.append(config.root / prompt.source_file)
    for path in files:
        h.update(str(os.path.relpath(path, config.root)).encode() + b"\0")
        h.update(Path(path).read_bytes() + b"\0")
    return h.hexdigest()


def seeds(config: Config, overrides: RecallOverrides) -> dict[str, int]:
    """The recall seed of each builder prompt, overrides applied."""
    return {p.name: effective_prompt(p, overrides).recall.seed for p in builder_prompts(config)}


# --------------------------------------------------------------------------- capture


def _trial_plan(config: Config, prompt: PromptConfig) -> PromptPlan:
    """PROMPT's recall cells with every planned trial, as ``needle check`` plans them (no baseline)."""
    counter = get_counter(prompt.tokenizer, model=prompt.model, settings=prompt)
    haystack = HaystackBuilder(config, prompt, counter, seed=prompt.recall.seed)
    rs = prompt.recall
    sizes = list(rs.sizes) if rs.sizes != "auto" else _auto_sizes(prompt, haystack)
    power = plan_for(rs, sizes)
    cells = [CellRun(s, d, power.trials, style=st) for st in rs.styles for s in sizes for d in rs.depths]
    return PromptPlan(prompt.name, prompt, None, sizes, haystack, "", cells, power=power)


def _auto_sizes(prompt: PromptConfig, haystack: HaystackBuilder) -> list[int]:
    from needle_action.recall.plan.prompt import auto_sizes

    ladder = auto_sizes(context_window(prompt), prompt.reserve_output_tokens)
    return [s for s in ladder if s > haystack.base_tokens()]


def _capture_prompt(config: Config, prompt: PromptConfig) -> None:
    """Every call ``needle check`` makes of PROMPT's builder: its fixtures, then its recall trials."""
    fixtures: list[Path | None] = [*config.fixture_paths(prompt)] or [None]
    for fixture in fixtures:
        render_case(config, prompt, fixture)
    recall_fixture = config.recall_fixture(prompt)
    render_case(config, prompt, recall_fixture)
    if skip_reason(prompt) is not None:
        return
    plan = _trial_plan(config, prompt)
    for cell, index in every_trial(plan, trial_needles):
        needle, reference = trial_needles(plan, cell, index)
        plan.builder.build(cell.size, cell.depth, needle, index, reference)


def capture(
    config: Config, out_dir: Path, *, overrides: RecallOverrides, only: list[str] | None = None
) -> dict[str, int]:
    """Run every builder of CONFIG over its fixtures and recall trial inputs; write OUT_DIR.
    Returns the number of distinct requests captured per prompt."""
    prompts = builder_prompts(config, only)
    if not prompts:
        raise ConfigError(
            "no prompt of this file is built in code: there is nothing to capture",
            file=config.path,
            hint='capture runs prompts with builder = "file.py:function"',
        )
    calls: dict[str, dict[str, Any]] = {p.name: {} for p in prompts}

    def record(name: str, key: str, kwargs: dict[str, Any], body: Any) -> None:
        calls.setdefault(name, {})[key] = body

    with builders.recording(record):
        for prompt in prompts:
            _capture_prompt(config, effective_prompt(prompt, _full(overrides)))
    _write(config, out_dir, overrides, calls)
    return {name: len(bodies) for name, bodies in calls.items()}


def _full(overrides: RecallOverrides) -> RecallOverrides:
    return RecallOverrides(seed=overrides.seed, trials=overrides.trials, full_trials=True)


def _write(
    config: Config, out_dir: Path, overrides: RecallOverrides, calls: dict[str, dict[str, Any]]
) -> None:
    folder = out_dir / "requests"
    folder.mkdir(parents=True, exist_ok=True)
    for name, bodies in calls.items():
        lines = [
            json.dumps({"key": k, "body": b}, ensure_ascii=False, sort_keys=False) for k, b in bodies.items()
        ]
        (folder / f"{name}.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    prompts = {
        p.name: {"builder": p.builder, "calls": len(calls.get(p.name, {}))} for p in builder_prompts(config)
    }
    manifest = {
        "format": FORMAT,
        "needle_version": __version__,
        "config_hash": config_hash(config),
        "seeds": seeds(config, overrides),
        "prompts": {k: v for k, v in prompts.items() if k in calls},
    }
    (out_dir / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")


# --------------------------------------------------------------------------- measuring captured requests


def _read(path: Path, max_bytes: int) -> str:
    if path.is_symlink() or not path.is_file():
        raise ConfigError(
            "not a regular file in the captured requests",
            file=display_path(path),
            hint="run `needle capture` again",
        )
    return read_text(path, what="the captured file", file=display_path(path), max_bytes=max_bytes)


def _manifest(folder: Path) -> dict[str, Any]:
    path = folder / MANIFEST
    if not path.exists():
        raise ConfigError(
            f"{display_path(folder)} holds no {MANIFEST}: it is not a folder `needle capture` wrote",
            hint="pass the folder given to `needle capture --output`",
        )
    try:
        manifest = parse_json(_read(path, MAX_MANIFEST_BYTES))
    except DataError as exc:
        raise ConfigError(f"the manifest is not valid JSON: {exc.message}", file=display_path(path)) from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise ConfigError("the manifest is not one this needle reads", file=display_path(path))
    return manifest


def _check_manifest(config: Config, manifest: dict[str, Any], overrides: RecallOverrides, file: str) -> None:
    """The captured folder matches this config, seed and needle version, or an error says which not."""
    expected: dict[str, Any] = {
        "needle_version": __version__,
        "config_hash": config_hash(config),
        "seeds": seeds(config, overrides),
    }
    for key, want in expected.items():
        got = manifest.get(key)
        if key == "seeds" and isinstance(got, dict):
            want = {k: v for k, v in want.items() if k in (manifest.get("prompts") or {})}
        if got != want:
            what = {
                "needle_version": "another needle version",
                "config_hash": "another threshold file, fixtures or builder module",
                "seeds": "another recall seed",
            }[key]
            raise ConfigError(
                f"the captured requests were made with {what} (manifest {key}: {got!r}, this run: {want!r})",
                file=file,
                hint="capture again with the same checkout, config and --seed as this run",
            )


def load_captured(config: Config, folder: Path, overrides: RecallOverrides) -> dict[str, Any]:
    """The captured bodies (call key -> body) in FOLDER, after the manifest is checked against CONFIG."""
    manifest = _manifest(folder)
    _check_manifest(config, manifest, overrides, display_path(folder / MANIFEST))
    bodies: dict[str, Any] = {}
    total = 0
    for name in manifest.get("prompts") or {}:
        path = folder / "requests" / f"{name}.jsonl"
        text = _read(path, MAX_REQUESTS_BYTES - total)
        total += len(text)
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                entry = parse_json(line)
            except DataError as exc:
                raise ConfigError(
                    f"not valid JSON: {exc.message}", file=display_path(path), line=number
                ) from None
            if not isinstance(entry, dict) or not isinstance(entry.get("key"), str) or "body" not in entry:
                raise ConfigError(
                    'each line is {"key": ..., "body": ...}', file=display_path(path), line=number
                )
            bodies[entry["key"]] = entry["body"]
    return bodies


@contextmanager
def measuring_captured(config: Config, folder: Path, overrides: RecallOverrides) -> Iterator[Config]:
    """Within the block, builder prompts are answered from FOLDER and no builder runs. Yields CONFIG
    without its providers tables: the folder came from a job that ran pull request code, and the key
    goes only to each provider's official API or the URL the environment sets."""
    bodies = load_captured(config, folder, overrides)
    prompts = {name: p.model_copy(update={"providers": {}}) for name, p in config.prompts.items()}
    with builders.replaying(bodies):
        yield config.model_copy(update={"prompts": prompts})


__all__ = ["capture", "config_hash", "load_captured", "measuring_captured"]
