"""tiktoken's BPE encodings (``tiktoken:o200k_base``, ``tiktoken:cl100k_base``), offline.

Exact only for an OpenAI model that uses that encoding (``gpt-4o`` -> o200k_base, ``gpt-4`` ->
cl100k_base, ...). A chat request is counted the way OpenAI documents it: every message costs its
content, its role, and 3 framing tokens, and the reply is primed with 3 more; tools cost the
cookbook's per-function and per-property overheads (:mod:`needle_action.tokens.openai_chat`,
docs/tokens.md). A Claude model's request is estimated from its Messages body instead, with the
tool-use system prompt and image/PDF costs Anthropic documents (:mod:`needle_action.tokens.claude_offline`).
"""

from __future__ import annotations

import json
import marshal
import os
from collections.abc import Sequence
from functools import cache

import tiktoken
from tiktoken.model import encoding_name_for_model

from needle_action.core import environment
from needle_action.core.dataformats import JSON
from needle_action.core.errors import TokenizerError
from needle_action.request.prompt import RenderedPrompt
from needle_action.request.wire import anthropic_body, openai_body
from needle_action.tokens import tiktoken_cache
from needle_action.tokens.base import is_claude
from needle_action.tokens.claude_offline import claude_tokens
from needle_action.tokens.openai_chat import (  # noqa: F401 - the overheads, re-exported
    TOKENS_PER_MESSAGE,
    TOKENS_REPLY_PRIMING,
    chat_tokens,
    tool_overheads,
)

# OpenAI's documented chat overhead (cookbook "How to count tokens with tiktoken"): each message is
# framed as <|start|>{role}\n{content}<|end|>\n: 3 framing tokens + the role's own tokens; every
# reply is primed with <|start|>assistant<|message|>: 3 tokens. Tools: tokens/openai_chat.py.

TIKTOKEN_ENCODINGS = ("o200k_base", "cl100k_base")


# tiktoken's encode_ordinary_batch starts a fresh pool of threads on every call: on the few dozen
# texts a recall trial or a filler batch holds that costs ~10x the encoding itself (48 filler
# passages, 18K chars: 0.9 ms one by one, 8-10 ms batched, on 2 cores). Batches pay only once the
# texts are long enough for the threads to share real work.
BATCH_MIN_CHARS = 1_000_000


def _tiktoken_fix_hint() -> str:
    return (
        "the encodings ship in the `bpe-openai` package: `pip install bpe-openai` then "
        '`python -m needle_action.tokens.tiktoken_cache "$TIKTOKEN_CACHE_DIR"`, '
        "or set TIKTOKEN_CACHE_DIR to a folder that already holds tiktoken's cached files"
    )


@cache
def load_encoding(encoding: str) -> tiktoken.Encoding:
    """Load a tiktoken encoding without ever touching the network.

    tiktoken downloads a missing encoding and only fails after a network timeout on an offline
    machine, so we check its cache file first (seeding it from bpe-openai when installed).
    """
    if encoding not in TIKTOKEN_ENCODINGS:
        raise TokenizerError(
            f"unsupported tiktoken encoding {encoding!r}",
            hint=f"use one of: {', '.join('tiktoken:' + e for e in TIKTOKEN_ENCODINGS)}",
        )
    folder = environment.tiktoken_cache_dir()
    if not tiktoken_cache.ensure(encoding, folder):
        where = (
            "(caching disabled: TIKTOKEN_CACHE_DIR is empty)"
            if folder is None
            else str(tiktoken_cache.cache_path(folder, encoding))
        )
        raise TokenizerError(
            f"tiktoken encoding {encoding} is not available offline: no cached file at {where}",
            hint=_tiktoken_fix_hint(),
        )
    try:
        return _parsed(encoding) or tiktoken.get_encoding(encoding)
    except Exception as exc:  # corrupt cache file that tiktoken then tried to re-download, ...
        raise TokenizerError(
            f"tiktoken could not load {encoding}: {type(exc).__name__}: {exc}", hint=_tiktoken_fix_hint()
        ) from None


def _parsed(encoding: str) -> tiktoken.Encoding | None:
    """The encoding from a parsed copy of tiktoken's cache file, written the first time.

    tiktoken parses its base64 file on every start: about 1.1-1.7 s of a 2-core machine for
    o200k_base, on the critical path of every command that counts. The ranks are kept beside the
    file in ``marshal`` format (plain bytes -> int data, loaded in ~0.1 s; marshal builds no
    arbitrary objects) and rebuilt whenever the source file is newer. None -> load the usual way.
    """
    folder = environment.tiktoken_cache_dir()
    if folder is None:
        return None
    src = tiktoken_cache.cache_path(folder, encoding)
    parsed = src.with_name(src.name + ".ranks.marshal")
    try:
        if parsed.is_file() and parsed.stat().st_mtime >= src.stat().st_mtime:
            data = marshal.loads(parsed.read_bytes())  # noqa: S302 - our own cache of plain data (see above)
            return tiktoken.Encoding(
                name=data["name"],
                pat_str=data["pat_str"],
                mergeable_ranks=data["mergeable_ranks"],
                special_tokens=data["special_tokens"],
            )
        enc = tiktoken.get_encoding(encoding)
        data = {
            "name": enc.name,
            "pat_str": enc._pat_str,  # noqa: SLF001 - what tiktoken itself builds Encoding from
            "mergeable_ranks": enc._mergeable_ranks,  # noqa: SLF001
            "special_tokens": enc._special_tokens,  # noqa: SLF001
        }
        tmp = parsed.with_name(f"{parsed.name}.{os.getpid()}.tmp")
        tmp.write_bytes(marshal.dumps(data))
        os.replace(tmp, parsed)
        return enc
    except (OSError, ValueError, EOFError, TypeError, KeyError):
        return None  # unreadable or foreign copy: tiktoken's own path still works


def _openai_encoding_for(model: str) -> str | None:
    try:
        return encoding_name_for_model(model)
    except KeyError:
        return None


class TiktokenCounter:
    """An OpenAI encoding, offline; exact for the models that use it, an estimate for others."""

    calls_api = False

    def __init__(self, encoding: str, *, model: str) -> None:
        self.encoding = encoding
        self.model = model
        self._enc = load_encoding(encoding)
        self.name = f"tiktoken:{encoding}"
        self.cache_id = self.name if not model else f"{self.name}:{model}"
        self.exact = _openai_encoding_for(model) == encoding
        self._images = "anthropic" if is_claude(model) else "openai"

    def count_texts(self, texts: list[str]) -> list[int]:
        if not texts:
            return []
        if len(texts) < 2 or sum(map(len, texts)) < BATCH_MIN_CHARS:
            return [len(self._enc.encode_ordinary(t)) for t in texts]
        return [len(ids) for ids in self._enc.encode_ordinary_batch(texts)]

    def _count(self, text: str) -> int:
        return len(self._enc.encode_ordinary(text)) if text else 0

    def exact_for(self, prompt: RenderedPrompt) -> bool:
        """Exact for this prompt: the model's own encoding, and tools (if any) on a model family
        whose tool overheads OpenAI documents."""
        return self.exact and (not prompt.tools or tool_overheads(self.model)[1])

    def count_prompt(self, prompt: RenderedPrompt) -> int:
        """The chat request as OpenAI counts it (:mod:`needle_action.tokens.openai_chat`): messages
        with their framing, tools with their overheads, tool calls, images by their pixels; plus a
        structured-output schema's JSON (approximate: OpenAI does not document its cost)."""
        if self._images == "anthropic":  # a Claude model: its own request, its documented overheads
            return claude_tokens(anthropic_body(prompt, self.model, 1), self._count, self.model)
        body = openai_body(prompt, self.model or "gpt-4o", 1)
        total = chat_tokens(body, self._count, self.model, images=self._images)
        return total + self._count(schema_text(body))

    def count_many(self, prompts: Sequence[RenderedPrompt]) -> list[int]:
        """Every prompt of PROMPTS, as :meth:`count_prompt` counts it, with the texts of all of
        them encoded in one batch (the path ``count_prompts`` takes).

        A request's count is fixed costs (framing, tool overheads, images) plus the tokens of each
        of its texts, each counted once (:func:`~needle_action.tokens.openai_chat.chat_tokens` only
        ever adds them), so each request is planned first, then every distinct text of the batch
        is encoded once: a section variant repeats most of its request's texts at no extra cost.
        """
        plans = [self._plan(p) for p in prompts]
        distinct = list(dict.fromkeys(t for _, texts in plans for t in texts))
        tokens = dict(zip(distinct, self.count_texts(distinct), strict=True))
        return [fixed + sum(tokens[t] for t in texts) for fixed, texts in plans]

    def _plan(self, prompt: RenderedPrompt) -> tuple[int, list[str]]:
        """PROMPT's fixed tokens and the texts whose tokens it adds (see :meth:`count_many`)."""
        texts: list[str] = []

        def record(text: str) -> int:
            if text:
                texts.append(text)
            return 0

        if self._images == "anthropic":
            return claude_tokens(anthropic_body(prompt, self.model, 1), record, self.model), texts
        body = openai_body(prompt, self.model or "gpt-4o", 1)
        fixed = chat_tokens(body, record, self.model, images=self._images)
        record(schema_text(body))
        return fixed, texts


def schema_text(body: JSON) -> str:
    """The JSON schema of a chat body's structured-output ``response_format``, or ""."""
    fmt = body.get("response_format")
    if not isinstance(fmt, dict) or fmt.get("type") != "json_schema":
        return ""
    return json.dumps(fmt.get("json_schema") or {}, sort_keys=True, ensure_ascii=False)
