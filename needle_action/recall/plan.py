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
from dataclasses import dataclass
from importlib import resources

from needle_action import __version__
from needle_action.config.model import Config, PromptConfig
from needle_action.errors import ConfigError
from needle_action.paths import relative
from needle_action.results import SkipKind

# Recall settings that change how a run is bounded or billed, not what a complete result contains:
# left out of the settings hash so raising a cap or the concurrency still finds the cached result.
HASH_EXCLUDED = {"concurrency", "max_calls", "max_cost_usd", "prompt_cache"}
HAYSTACK_LAYOUT = 2
LADDER_START = 2000
LADDER_FACTOR = 4


@dataclass(frozen=True)
class RecallOverrides:
    """Command-line (or action input) overrides of the threshold file's recall settings."""

    seed: int | None = None
    provider: str | None = None
    model: str | None = None
    trials: int | None = None


def effective_prompt(prompt: PromptConfig, overrides: RecallOverrides | None) -> PromptConfig:
    """PROMPT with the overrides (seed, provider, model, trials) applied."""
    if overrides is None:
        return prompt
    recall_updates: dict = {}
    if overrides.seed is not None:
        recall_updates["seed"] = overrides.seed
    if overrides.trials is not None:
        if overrides.trials < 1:
            raise ConfigError("--trials must be at least 1", hint="e.g. --trials 5")
        recall_updates["trials"] = overrides.trials
    updates: dict = {"recall": prompt.recall.model_copy(update=recall_updates)}
    if overrides.provider:
        updates["provider"] = overrides.provider
    if overrides.model:
        updates["model"] = overrides.model
    return prompt.model_copy(update=updates)


def skip_reason(prompt: PromptConfig) -> tuple[SkipKind, str] | None:
    """Why PROMPT's recall cannot run at all, from its settings alone; None when it can."""
    if not prompt.recall.enabled:
        return SkipKind.DISABLED, "recall.enabled = false"
    missing = [k for k in ("context_var", "question_var") if not getattr(prompt, k)]
    if missing:
        return SkipKind.NO_SLOTS, (
            f"{' and '.join(missing)} not set (recall needs the context slot and the question slot)"
        )
    return None


@functools.cache
def _context_windows() -> dict:
    text = (resources.files("needle_action") / "data" / "context_windows.toml").read_text("utf-8")
    return tomllib.loads(text)


def context_window(prompt: PromptConfig, provider: object = None) -> int:
    """The model's context window: the provider's own figure when it has one (the local model's
    n_ctx), else ``data/context_windows.toml`` (longest matching model-id prefix)."""
    for attr in ("context_window", "max_ctx"):  # max_ctx: the local provider's largest window
        own = getattr(provider, attr, None)
        if isinstance(own, int) and own > 0:
            return own
    if prompt.provider == "local":
        ps = prompt.providers.get("local")
        if ps is not None and ps.n_ctx:
            return ps.n_ctx
    table = _context_windows()
    matches = [p for p in table.get("models", {}) if prompt.model.startswith(p)]
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
    for pattern in prompt.recall.filler_globs:
        for path in sorted(config.root.glob(pattern)):
            if path.is_file():
                h.update(relative(config.root, path, resolved=True).encode() + b"\0")
                h.update(hashlib.sha256(path.read_bytes()).digest())
    return h.hexdigest()


def settings_hash(
    config: Config, prompt: PromptConfig, *, content_hash: str, fixture: str | None, sizes: list[int]
) -> str:
    """sha256 over everything that decides a complete recall result: the assembled prompt with its
    fixture (content hash), the fixture's name, provider, model, tokenizer, the provider settings
    that change answers, the recall settings (seed included, sizes resolved), the filler files'
    contents and the tool's major version. Paths are relative, so a git worktree of the base branch
    hashes the same as the head."""
    recall = prompt.recall.model_dump(mode="json", exclude=HASH_EXCLUDED)
    recall["sizes"] = sizes
    ps = prompt.providers.get(prompt.provider)
    payload = {
        "tool_major": __version__.split(".")[0],
        # how trials are built: 2 = one filler stream for every trial and depth, the filler amount
        # fixed per cell (issue 12); results built the older way are not reused
        "haystack": HAYSTACK_LAYOUT,
        "prompt": content_hash,
        "fixture": fixture,
        "provider": prompt.provider,
        "model": prompt.model,
        "tokenizer": [prompt.tokenizer, prompt.tokenizer_safety_factor],
        "provider_settings": ps.model_dump(mode="json", include={"base_url", "model_path", "n_ctx"})
        if ps
        else None,
        "recall": recall,
        "filler": _filler_digest(config, prompt) if prompt.recall.filler_globs else None,
    }
    blob = json.dumps(payload, sort_keys=True, separators=(",", ":")).encode()
    return hashlib.sha256(blob).hexdigest()


def trial_rng(seed: int, prompt_name: str, size: int, depth: float, trial: int) -> random.Random:
    """The RNG of one trial: a pure function of its coordinates, never of scheduling order."""
    return random.Random(f"needle:{seed}:{prompt_name}:{size}:{depth!r}:{trial}")
