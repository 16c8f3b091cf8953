"""In-process model through llama-cpp-python: no key, no network, reproducible.

* Default model: the embedded Gemma 3 270M (:mod:`needle_action.providers.local_model`); any .gguf with
  ``providers.local.model_path``.
* Two prompt formats, chosen from the GGUF metadata. A GGUF with a chat template (instruction
  models) gets the chat through that template. One without (base models, like the embedded
  ``google/gemma-3-270m``, which is the pretrained, not the ``-it``, checkpoint) gets a plain
  transcript ending in ``Answer:``: measured on the embedded model, a chat format makes it echo the
  prompt, while the transcript makes it answer. Its answer is the first non-empty line (a base
  model keeps writing the next "Question:" otherwise).
* Decoding is greedy (``temperature=0``). Shared prompt prefixes are not evaluated twice, and an
  answer still depends on the prompt alone: see :mod:`needle_action.providers.kv_reuse` (the KV
  state of the prefix shared with the previous prompt, cut to a multiple of the evaluation chunk,
  so every prompt is evaluated in the same chunks as from an empty state).
* ``Llama`` is not thread-safe: every inference holds one process-wide lock and runs in a worker
  thread (``asyncio.to_thread``) so the event loop stays free for the rest of the engine.
* Context: ``providers.local.n_ctx`` when set (fixed); otherwise start from the size the registry
  derives from the recall sizes and, when a prompt does not fit, reload with a larger window up to
  the model's training context. A prompt beyond that is refused with RequestRejected.
"""

from __future__ import annotations

import asyncio
import json
import re
import threading

from needle_action.assemble import RenderedPrompt
from needle_action.config import ProviderSettings
from needle_action.errors import ConfigError
from needle_action.providers.base import Breakpoint, Completion
from needle_action.providers.kv_reuse import prepare, prompt_tokens
from needle_action.providers.local_model import N_CTX_TRAIN, get_llama
from needle_action.providers.retry import RequestRejected

DEFAULT_MODEL = "gemma-3-270m"
DEFAULT_N_CTX = 4096
_infer_lock = threading.Lock()  # one llama.cpp inference at a time in this process
_TOO_LONG = re.compile(r"Requested tokens \((\d+)\) exceed context window of (\d+)")


def round_ctx(tokens: int) -> int:
    """Round up to a multiple of 1024 (llama.cpp allocates the KV cache for the whole window)."""
    return max(1024, -(-int(tokens) // 1024) * 1024)


def transcript(messages: list[dict]) -> str:
    """Plain-text rendering of a chat for a base model: system text, user turns as written,
    assistant turns as ``Answer: ...``, ending with ``Answer:`` for the model to complete.

    Content may be a string or Anthropic content blocks: a tool call reads ``Tool call NAME:
    {input}``, a tool result ``Tool result:`` then its text, a document ``Document TITLE:`` then its
    text, an image ``[image]``; an OpenAI ``tool`` message reads as a tool result."""
    parts: list[str] = []
    for m in messages:
        text = _readable(m.get("content"))
        if m["role"] == "assistant":
            parts.append(f"Answer: {text}")
        elif m["role"] == "tool":
            parts.append(f"Tool result:\n{text}")
        else:
            parts.append(text)
    return "\n\n".join(parts).rstrip() + "\nAnswer:"


def _readable(content) -> str:
    """CONTENT (a string or content blocks) as plain text for a base model."""
    if isinstance(content, str):
        return content
    out: list[str] = []
    for b in content or ():
        kind = b.get("type") if isinstance(b, dict) else None
        if kind == "text":
            out.append(str(b.get("text", "")))
        elif kind == "tool_use":
            out.append(f"Tool call {b.get('name', '')}: {json.dumps(b.get('input', {}), ensure_ascii=False)}")
        elif kind == "tool_result":
            out.append(f"Tool result:\n{_readable(b.get('content', ''))}")
        elif kind == "document":
            source = b.get("source") or {}
            body = source.get("data") if source.get("type") == "text" else _readable(source.get("content"))
            out.append(f"Document {b.get('title') or ''}:\n{body or ''}".replace("Document :", "Document:"))
        elif kind in ("image", "image_url"):
            out.append("[image]")
    return "\n\n".join(out)


def first_line(text: str) -> str:
    for line in text.splitlines():
        if line.strip():
            return line.strip()
    return ""


def has_chat_template(llm) -> bool:
    return "tokenizer.chat_template" in (getattr(llm, "metadata", None) or {})


class LocalProvider:
    name = "local"
    sequential = True  # one inference at a time: the scheduler keeps a cell's trials together

    def __init__(
        self,
        model: str = DEFAULT_MODEL,
        settings: ProviderSettings | None = None,
        *,
        n_ctx: int | None = None,
        reuse_prefix: bool = True,
    ) -> None:
        settings = settings or ProviderSettings()
        self.settings = settings
        self.model_path = settings.model_path
        self.model = model
        self.fixed_ctx = settings.n_ctx is not None
        self.n_ctx = int(settings.n_ctx or n_ctx or DEFAULT_N_CTX)
        self.max_ctx = self.n_ctx if self.fixed_ctx else max(self.n_ctx, N_CTX_TRAIN)
        self.retries = 0
        self.reuse_prefix = reuse_prefix
        self.reused_tokens = 0  # prompt tokens not evaluated thanks to a kept prefix

    def _llm(self):
        return get_llama(self.n_ctx, self.model_path)

    def messages(self, prompt: RenderedPrompt) -> list[dict]:
        out = [{"role": "system", "content": prompt.system}] if prompt.system else []
        out += [{"role": m.role, "content": m.text} for m in prompt.messages]
        if not any(m["role"] == "user" for m in out):
            raise ConfigError(
                "the prompt has no user message to send",
                file=prompt.source or None,
                hint="a prompt needs at least one user turn besides the system text",
            )
        return out

    def _fit(self, llm, messages: list[dict], max_output_tokens: int):
        """Grow the window before the call when the prompt plus answer clearly will not fit."""
        if self.fixed_ctx:
            return llm
        if self.model_path:  # another GGUF: its own training window bounds the growth
            try:
                self.max_ctx = max(self.n_ctx, int(llm._model.n_ctx_train()))
            except Exception:  # noqa: BLE001 - private API; keep the default bound
                pass
        text = "\n".join(m["content"] for m in messages)
        # the chat template adds a few tokens per turn; 16 each is generous for Gemma's markers
        estimate = len(llm.tokenize(text.encode("utf-8"), add_bos=True, special=False))
        estimate += 16 * len(messages) + max_output_tokens
        if estimate > self.n_ctx and round_ctx(estimate) <= self.max_ctx:
            self.n_ctx = round_ctx(estimate)
            return self._llm()
        return llm

    def _run(self, messages: list[dict], max_output_tokens: int) -> dict:
        with _infer_lock:
            llm = self._fit(self._llm(), messages, max_output_tokens)
            while True:
                try:
                    return self._infer(llm, messages, max_output_tokens)
                except ValueError as exc:
                    m = _TOO_LONG.search(str(exc))
                    if not m:
                        raise
                    needed = int(m.group(1)) + max_output_tokens
                    if self.fixed_ctx or needed > self.max_ctx or round_ctx(needed) <= self.n_ctx:
                        window = self.n_ctx if self.fixed_ctx else self.max_ctx
                        raise RequestRejected(
                            f"the prompt needs {needed} tokens (with the answer), beyond the local "
                            f"model's context window of {window}",
                            status=None,
                            hint="use smaller recall sizes for the local model, or raise providers.local.n_ctx",
                        ) from None
                    self.n_ctx = min(self.max_ctx, round_ctx(needed))
                    llm = self._llm()

    def _infer(self, llm, messages: list[dict], max_output_tokens: int) -> dict:
        if has_chat_template(llm):
            llm.reset()  # the template tokenises inside llama-cpp-python: no aligned reuse there
            resp = llm.create_chat_completion(
                messages=messages, max_tokens=max_output_tokens, temperature=0.0, seed=0
            )
            return {
                "text": resp["choices"][0]["message"].get("content") or "",
                "usage": resp.get("usage") or {},
            }
        prompt = transcript(messages)
        tokens = prompt_tokens(llm, prompt) if self.reuse_prefix else None
        if tokens is None:
            llm.reset()
            resp = llm.create_completion(prompt=prompt, max_tokens=max_output_tokens, temperature=0.0, seed=0)
        else:
            self.reused_tokens += prepare(llm, tokens)
            resp = llm.create_completion(prompt=tokens, max_tokens=max_output_tokens, temperature=0.0, seed=0)
        return {"text": first_line(resp["choices"][0].get("text") or ""), "usage": resp.get("usage") or {}}

    async def complete(
        self, prompt: RenderedPrompt, *, max_output_tokens: int, breakpoints: tuple[Breakpoint, ...] = ()
    ) -> Completion:
        messages = self.messages(prompt)
        resp = await asyncio.to_thread(self._run, messages, max_output_tokens)
        usage = resp["usage"]
        return Completion(
            text=resp["text"],
            input_tokens=usage.get("prompt_tokens"),
            output_tokens=usage.get("completion_tokens"),
            attempts=1,
        )

    async def aclose(self) -> None:
        return None
