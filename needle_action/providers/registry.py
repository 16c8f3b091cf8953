"""Pick and build the provider a prompt's settings ask for."""

from __future__ import annotations

import contextlib
import importlib
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from needle_action.config.model import PromptSettings, ProviderSettings
from needle_action.core.errors import ConfigError
from needle_action.core.names import PROVIDER_NAMES
from needle_action.providers.base import Provider
from needle_action.providers.local.model import SPLIT_TOKENS
from needle_action.providers.local.provider import DEFAULT_MODEL, round_ctx
from needle_action.providers.specs import SPECS

OUTPUT_MARGIN = 512  # chat-template tokens, question and instructions around the context slot
EXACT_MARGIN = 64  # the same when the sizes are the model's own counts: only the answer's framing


def local_n_ctx(settings: PromptSettings) -> int | None:
    """Window for the local model: largest recall size + room for the rest of the prompt and the
    answer. None for ``sizes = "auto"`` (the provider then uses the model's training window).

    With ``tokenizer = "local"`` a size is the whole prompt counted by the model's own tokenizer,
    so the window needs little beyond it; a tighter window is faster (llama.cpp evaluated a 578-token
    prompt in 3.4 ms a token with a 1,024-token window, 3.8 with 2,048, 4.1 with 4,096) and a prompt
    that does not fit still grows it (local_infer.py)."""
    sizes = settings.recall.sizes
    if sizes == "auto" or not sizes:
        return None
    largest, answer = max(sizes), settings.recall.max_output_tokens
    if settings.tokenizer == "local":
        return round_ctx(largest + EXACT_MARGIN + answer)
    return round_ctx(int(largest * 1.25) + OUTPUT_MARGIN + answer)


def known_window(settings: PromptSettings) -> int | None:
    """The window the prompt's provider sets itself before it is built (the embedded model's
    ``n_ctx`` in ``[providers.local]``); None: the model's published one (data/context_windows.toml)."""
    own = settings.providers.get(settings.provider)
    return own.n_ctx if settings.provider == "local" and own is not None and own.n_ctx else None


def answer_determinants(settings: PromptSettings) -> list[int | None] | None:
    """What beyond the request decides an answer of the prompt's provider, for the settings hash:
    the embedded model's window and evaluation chunk (its arithmetic changes with them); None for
    a provider behind an API."""
    return [local_n_ctx(settings), SPLIT_TOKENS] if settings.provider == "local" else None


def make_provider(
    prompt_settings: PromptSettings, *, model: str | None = None, provider: str | None = None, **kwargs: Any
) -> Provider:
    """The provider for these settings; ``model``/``provider`` override them (CLI flags).

    Extra keyword arguments (``sleep``, ``rng``) reach the HTTP providers, for tests.
    Raises ProviderUnavailable when the provider cannot be used (no key, package missing).
    """
    name = provider or prompt_settings.provider
    if name not in PROVIDER_NAMES:
        raise ConfigError(f"unknown provider {name!r}", hint=f"choose one of {', '.join(PROVIDER_NAMES)}")
    settings = prompt_settings.providers.get(name) or ProviderSettings()
    chosen = model or prompt_settings.model
    cls = _provider_class(name)
    if name != "local":
        return cls(chosen, settings, **kwargs)
    # a Claude/GPT id left in [defaults] means nothing to the local model: name the file instead
    if model is None and (chosen.startswith(("claude-", "gpt-")) or not chosen):
        chosen = Path(settings.model_path).stem if settings.model_path else DEFAULT_MODEL
    return cls(chosen, settings, n_ctx=local_n_ctx(prompt_settings))


def prestart(prompts: Iterable[PromptSettings]) -> None:
    """Start, in the background, what the first recall call of PROMPTS would wait for: the embedded
    model's worker and its model load (once per model file: the first prompt's window, as the
    engine's provider for that file has). HTTP providers need none."""
    from needle_action.providers.local.provider import LocalProvider

    for prompt in prompts:
        if prompt.provider == "local" and prompt.recall.enabled:
            provider = make_provider(prompt, model=prompt.model, provider=prompt.provider)
            if isinstance(provider, LocalProvider):
                provider.prestart()  # a no-op for a model file whose worker started already


def _provider_class(name: str) -> Callable[..., Provider]:
    """The class named in the provider's spec, imported now (each SDK is slow to import)."""
    module, _, attr = SPECS[name].factory.partition(":")
    factory: Callable[..., Provider] = getattr(importlib.import_module(module), attr)
    return factory


def import_ahead(names: Iterable[str]) -> threading.Thread | None:
    """Start importing the SDKs of providers NAMES in a background thread. ``import anthropic``
    alone takes 1.3-1.5 s of CPU, and the first call waits for it; started before planning, it
    overlaps the rendering (worker processes) and counting (tiktoken, native) of the first prompt.
    The import lock makes ``make_provider`` wait for an import already under way, never repeat it."""
    modules = sorted({SPECS[n].factory.partition(":")[0] for n in names if n in SPECS})
    if not modules:
        return None
    thread = threading.Thread(target=_try_imports, args=(modules,), name="needle-import-ahead", daemon=True)
    thread.start()
    return thread


def _try_imports(modules: list[str]) -> None:
    for module in modules:
        with contextlib.suppress(Exception):  # make_provider imports it again and reports what is missing
            importlib.import_module(module)
