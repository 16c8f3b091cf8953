"""Planning a prompt's recall run before any call: the settings that apply, whether it can run,
the sizes of the grid, the hash that identifies a complete result, and each trial's random source.

Pure functions of the config (and, for ``sizes = "auto"``, of the provider's context window).
"""

from __future__ import annotations

import functools
import hashlib
import json
import random
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from typing import Any

from needle_action import __version__
from needle_action.config.model import Config, PromptConfig
from needle_action.core import environment
from needle_action.core.errors import ConfigError
from needle_action.core.paths import relative
from needle_action.providers import specs
from needle_action.providers.registry import answer_determinants, known_window
from needle_action.recall.trials.filler import filler_files
from needle_action.results import SCHEMA_VERSION, SkipKind

# Recall settings that change how a run is bounded or billed, not what a complete result contains:
# left out of the settings hash so raising a cap or the concurrency still finds the cached result.
HASH_EXCLUDED = {
    "concurrency",
    "max_calls",
    "max_cost_usd",
    "prompt_cache",
    "stop_on_drop",  # how a compared run stops (recall/sequential.py): a stopped run is never cached
    "stop_on_no_change",
}
# how trials are built: 2 = one filler stream for every trial and depth, the filler amount fixed per
# cell (issue 12); 3 = a gold trial orders the fixture's other items its own way (trials were one
# prompt when the fixture filled the size); results (and pools) built an older way are not reused
HAYSTACK_LAYOUT = 3
# What decides the *answers* a trial gets is less than what decides a result: the seed picks which
# needles are asked, trials how many, the rest how they are judged. Runs whose pool keys match are
# samples of the same recall and may be pooled (recall/history.py).
POOL_EXCLUDED = HASH_EXCLUDED | {
    "seed",
    "trials",
    "threshold",
    "early_stop",
    "alpha",
    "min_drop",
    "sizes",
    "depths",
    "enabled",
    "reorder_ab",  # an extra arm beside the cells: it changes no answer of theirs
}
LADDER_START = 2000
LADDER_FACTOR = 4


@dataclass(frozen=True)
class RecallOverrides:
    """Command-line (or action input) overrides of the threshold file's recall settings."""

    seed: int | None = None
    provider: str | None = None
    model: str | None = None
    trials: int | None = None
    # a run whose result will be compared with another runs every planned trial: early stopping
    # makes the number of trials depend on the answers, which the comparison's test cannot allow
    full_trials: bool = False


def effective_prompt(prompt: PromptConfig, overrides: RecallOverrides | None) -> PromptConfig:
    """PROMPT with the overrides (seed, provider, model, trials) applied."""
    if overrides is None:
        return prompt
    recall_updates: dict[str, Any] = {}
    if overrides.seed is not None:
        recall_updates["seed"] = overrides.seed
    if overrides.trials is not None:
        if overrides.trials < 1:
            raise ConfigError("--trials must be at least 1", hint="e.g. --trials 5")
        recall_updates["trials"] = overrides.trials
    if overrides.full_trials:
        recall_updates["early_stop"] = False
    updates: dict[str, Any] = {"recall": prompt.recall.model_copy(update=recall_updates)}
    if overrides.provider:
        updates["provider"] = overrides.provider
    if overrides.model:
        updates["model"] = overrides.model
    return prompt.model_copy(update=updates)


def skip_reason(prompt: PromptConfig) -> tuple[SkipKind, str] | None:
    """Why PROMPT's recall cannot run at all, from its settings alone; None when it can."""
    if not prompt.recall.enabled:
        return SkipKind.DISABLED, "recall.enabled = false"
    missing = [k for k, v in prompt.slots() if not v]
    if missing:
        return SkipKind.NO_SLOTS, (
            f"{' and '.join(missing)} not set (recall needs the context slot and the question slot)"
        )
    return None


@functools.cache
def _context_windows() -> dict[str, Any]:
    text = (resources.files("needle_action") / "data" / "context_windows.toml").read_text("utf-8")
    return tomllib.loads(text)


def context_window(prompt: PromptConfig, provider: object = None) -> int:
    """The model's context window: the provider's own figure when it has one (the local model's
    n_ctx), else ``data/context_windows.toml`` (longest matching model-id prefix, a cloud's id read
    as the model it names)."""
    for attr in ("context_window", "max_ctx"):  # max_ctx: the local provider's largest window
        own = getattr(provider, attr, None)
        if isinstance(own, int) and own > 0:
            return own
    own = known_window(prompt)
    if own is not None:
        return own
    table = _context_windows()
    model = specs.model_family(prompt.provider, prompt.model)  # a cloud's id: the model it names
    matches = [p for p in table.get("models", {}) if model.startswith(p)]
    if matches:
        return int(table["models"][max(matches, key=len)])
    return int(table["default"])


def auto_sizes(window: int, reserve: int, *, min_size: int = 0) -> list[int]:
    """Geometric ladder 2k, 8k, 32k, ... up to WINDOW - RESERVE (which is added as the top rung
    when it is well beyond the last one); rungs below MIN_SIZE (the prompt without context) drop."""
    top = window - reserve
    sizes: list[int] = []
    s = LADDER_START
    while s <= top:
        sizes.append(s)
        s *= LADDER_FACTOR
    if top >= 64 and (not sizes or top >= sizes[-1] * 1.5):
        sizes.append(top)
    return [s for s in sizes if s > min_size]


def _filler_digest(config: Config, prompt: PromptConfig) -> str:
    h = hashlib.sha256()
    for path in filler_files(config.workspace, prompt.recall.filler_globs):
        h.update(relative(config.root, path, resolved=True).encode() + b"\0")
        h.update(hashlib.sha256(path.read_bytes()).digest())
    return h.hexdigest()


def _answers_payload(
    config: Config,
    prompt: PromptConfig,
    *,
    content_hash: str,
    fixture: str | None,
    env: Mapping[str, str] | None,
) -> dict[str, Any]:
    # the endpoint the provider really calls (ENV's ANTHROPIC_BASE_URL counts): a result measured
    # against one server is never reused for another
    ps = prompt.providers.get(prompt.provider)
    return {
        "tool_major": __version__.split(".")[0],
        "results_schema": SCHEMA_VERSION,
        "haystack": HAYSTACK_LAYOUT,
        "prompt": content_hash,
        "fixture": fixture,
        "provider": prompt.provider,
        "model": prompt.model,
        "tokenizer": [prompt.tokenizer, prompt.tokenizer_safety_factor],
        "provider_settings": ps.model_dump(mode="json", include={"base_url", "model_path", "n_ctx"})
        if ps
        else None,
        # the embedded model's window (when derived from the sizes) and evaluation chunk: its
        # arithmetic, and so an answer, can differ from one to another
        "local_window": answer_determinants(prompt),
        "filler": _filler_digest(config, prompt) if prompt.recall.filler_globs else None,
        "endpoint": specs.endpoint(
            prompt.provider, ps.base_url if ps else None, environment.process() if env is None else env
        ),
    }


def _digest(payload: dict[str, Any]) -> str:
    # default=str: a fixture's expected answer may hold YAML dates or numbers
    blob = json.dumps(payload, sort_keys=True, separators=(",", ":"), default=str).encode()
    return hashlib.sha256(blob).hexdigest()


def settings_hash(
    config: Config,
    prompt: PromptConfig,
    *,
    content_hash: str,
    fixture: str | None,
    sizes: list[int],
    env: Mapping[str, str] | None = None,
    answer_keys: dict[str, Any] | None = None,
) -> str:
    """sha256 over everything that decides a complete recall result: the assembled prompt with its
    fixture (content hash), the fixture's name, provider, model, tokenizer, the provider settings
    that change answers, the recall settings (seed included, sizes resolved), the filler files'
    contents, the tool's major version, the results schema and the endpoint the provider calls; for
    gold needles also the fixture's ``expected`` and ``gold`` (ANSWER_KEYS), which decide the result
    without being rendered. Paths are relative, so a git worktree of the base branch hashes the same
    as the head."""
    recall = prompt.recall.model_dump(mode="json", exclude=HASH_EXCLUDED)
    if not recall["reorder_ab"]:  # off (the default) hashes as before the setting existed
        del recall["reorder_ab"]
    recall["sizes"] = sizes
    payload = _answers_payload(config, prompt, content_hash=content_hash, fixture=fixture, env=env)
    return _digest({**payload, "recall": recall, **_answer_keys(answer_keys)})


def pool_key(
    config: Config,
    prompt: PromptConfig,
    *,
    content_hash: str,
    fixture: str | None,
    env: Mapping[str, str] | None = None,
    answer_keys: dict[str, Any] | None = None,
) -> str:
    """sha256 over what decides the answers a trial gets (the settings hash without the seed, the
    trial counts, the grid and the judging rules): runs that share it may be pooled."""
    recall = prompt.recall.model_dump(mode="json", exclude=POOL_EXCLUDED)
    payload = _answers_payload(config, prompt, content_hash=content_hash, fixture=fixture, env=env)
    return _digest({**payload, "recall": recall, "kind": "pool", **_answer_keys(answer_keys)})


def _answer_keys(keys: dict[str, Any] | None) -> dict[str, Any]:
    # only present for gold needles, so every other prompt hashes exactly as before
    return {"answer_keys": keys} if keys is not None else {}


def trial_rng(
    seed: int, prompt_name: str, size: int, depth: float, trial: int, *, style: str | None = None
) -> random.Random:
    """The RNG of one trial: a pure function of its coordinates (its needle style included), never
    of scheduling order."""
    key = f"needle:{seed}:{prompt_name}:{size}:{depth!r}:{trial}"
    return random.Random(key if style is None else f"{key}:{style}")
