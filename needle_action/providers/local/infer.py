"""Inference on the embedded model, inside the model worker process (:mod:`.local_worker`).

Everything here touches llama.cpp's compute kernels, so it runs only in the worker: a native crash
there (a miscompiled CPU path, an out-of-memory kill) ends the worker, never the run.

* Two prompt formats, chosen from the GGUF metadata: a GGUF with a chat template gets the chat
  through it; one without (the embedded base Gemma) gets :func:`.local.transcript`, and its answer
  is the first non-empty line.
* Greedy decoding (``temperature=0``); shared prefixes are kept at fixed split points
  (:mod:`.kv_reuse`), so an answer depends on the prompt alone.
* The window: the request carries the provider's ``n_ctx`` / ``max_ctx`` / ``fixed_ctx``; when a
  prompt does not fit, a larger window is loaded (up to the model's training context) and the
  answer carries the new sizes back. A prompt beyond that is refused with ``RequestRejected``.
"""

from __future__ import annotations

import contextlib
import re
import time
from dataclasses import dataclass
from typing import Any

from needle_action.core.errors import ProviderUnavailable
from needle_action.providers.local.decode import greedy_line
from needle_action.providers.local.kv_reuse import prepare, prompt_tokens
from needle_action.providers.local.model import get_llama, loads
from needle_action.providers.local.text import first_line, has_chat_template, round_ctx, transcript

_TOO_LONG = re.compile(r"Requested tokens \((\d+)\) exceed context window of (\d+)")


class TooLong(ProviderUnavailable):
    """The prompt does not fit the largest window: the parent raises it as ``RequestRejected``
    (retry.py, which the worker does not import: it pulls in the config and pydantic)."""


@dataclass
class Window:
    """The provider's context window: its current size, its bound, and whether it is fixed."""

    n_ctx: int
    max_ctx: int
    fixed: bool


def complete(request: dict[str, Any]) -> dict[str, Any]:
    """Answer one request: ``model_path``, ``messages``, ``max_output_tokens``, ``reuse_prefix`` and
    the window (``n_ctx``, ``max_ctx``, ``fixed_ctx``). Returns ``text``, ``usage``, ``reused`` (prompt
    tokens not evaluated) and the window's sizes after the call."""
    window = Window(int(request["n_ctx"]), int(request["max_ctx"]), bool(request["fixed_ctx"]))
    path = request["model_path"]
    messages, max_output = request["messages"], int(request["max_output_tokens"])
    llm = _fit(get_llama(window.n_ctx, path), window, path, messages, max_output)
    while True:
        try:
            answer = _infer(llm, messages, max_output, bool(request["reuse_prefix"]))
            return {**answer, "n_ctx": window.n_ctx, "max_ctx": window.max_ctx}
        except ValueError as exc:
            m = _TOO_LONG.search(str(exc))
            if not m:
                raise
            needed = int(m.group(1)) + max_output
            if window.fixed or needed > window.max_ctx or round_ctx(needed) <= window.n_ctx:
                raise TooLong(
                    f"the prompt needs {needed} tokens (with the answer), beyond the local "
                    f"model's context window of {window.n_ctx if window.fixed else window.max_ctx}",
                    hint="use smaller recall sizes for the local model, or raise providers.local.n_ctx",
                ) from None
            window.n_ctx = min(window.max_ctx, round_ctx(needed))
            llm = get_llama(window.n_ctx, path)


def load(request: dict[str, Any]) -> dict[str, Any]:
    """Load ``model_path`` with a window of ``n_ctx`` now (the parent asks while it counts budgets,
    so the first answer does not wait for it); returns ``loads`` so far."""
    get_llama(int(request["n_ctx"]), request["model_path"])
    return {"loads": loads()}


def _fit(llm: Any, window: Window, path: str, messages: list[dict[str, Any]], max_output: int) -> Any:
    """Grow the window before the call when the prompt plus answer clearly will not fit."""
    if window.fixed:
        return llm
    # the model's own training window bounds the growth; a private API: if it fails, keep the
    # bound the provider sent
    with contextlib.suppress(Exception):
        window.max_ctx = max(window.n_ctx, int(llm._model.n_ctx_train()))  # noqa: SLF001
    text = "\n".join(m["content"] for m in messages)
    # the chat template adds a few tokens per turn; 16 each is generous for Gemma's markers
    estimate = len(llm.tokenize(text.encode("utf-8"), add_bos=True, special=False))
    estimate += 16 * len(messages) + max_output
    if estimate > window.n_ctx and round_ctx(estimate) <= window.max_ctx:
        window.n_ctx = round_ctx(estimate)
        return get_llama(window.n_ctx, path)
    return llm


def _infer(llm: Any, messages: list[dict[str, Any]], max_output: int, reuse_prefix: bool) -> dict[str, Any]:
    """One answer, with what it cost: ``reused`` (prompt tokens kept from the previous prompt's KV
    state), ``evaluated`` / ``generated`` (tokens llama.cpp ran, from its own counters), ``eval_s``
    (llama.cpp's time for them) and ``seconds`` (this whole function)."""
    started = time.perf_counter()
    _perf_reset(llm)
    if has_chat_template(llm):
        llm.reset()  # the template tokenises inside llama-cpp-python: no aligned reuse there
        resp = llm.create_chat_completion(messages=messages, max_tokens=max_output, temperature=0.0, seed=0)
        text, reused = resp["choices"][0]["message"].get("content") or "", 0
    else:
        text, reused, resp = _complete_transcript(llm, transcript(messages), max_output, reuse_prefix)
    return {
        "text": text,
        "usage": dict(resp.get("usage") or {}),
        "reused": reused,
        **_perf(llm),
        "seconds": round(time.perf_counter() - started, 4),
    }


def _complete_transcript(
    llm: Any, prompt: str, max_output: int, reuse_prefix: bool
) -> tuple[str, int, dict[str, Any]]:
    """(first line of the answer, prompt tokens reused, usage) for a base model's transcript.
    Generation stops once the first non-empty line is complete: the answer is that line, so the
    tokens after it would be thrown away (the line itself is unchanged)."""
    tokens = prompt_tokens(llm, prompt)
    if tokens is None:  # the model adds an end-of-sequence token: its own string path, no reuse
        llm.reset()
        resp = llm.create_completion(prompt=prompt, max_tokens=max_output, temperature=0.0, seed=0)
        return first_line(resp["choices"][0].get("text") or ""), 0, resp
    reused = prepare(llm, tokens) if reuse_prefix else 0
    if not reuse_prefix:
        llm.reset()
    text, generated = greedy_line(llm, tokens, max_output)
    usage = {
        "prompt_tokens": len(tokens),
        "completion_tokens": generated,
        "total_tokens": len(tokens) + generated,
    }
    return first_line(text), reused, {"usage": usage}


def _perf_reset(llm: Any) -> None:
    import llama_cpp

    # statistics only: an answer never depends on them
    with contextlib.suppress(Exception):
        llama_cpp.llama_perf_context_reset(llm._ctx.ctx)  # noqa: SLF001 - llama.cpp's own counters


def _perf(llm: Any) -> dict[str, Any]:
    """llama.cpp's counters since the last reset: prompt tokens evaluated in batches, tokens decoded
    one at a time (the answer), and the time spent on each (the model alone, no Python around it)."""
    import llama_cpp

    try:
        data = llama_cpp.llama_perf_context(llm._ctx.ctx)  # noqa: SLF001
    except Exception:  # noqa: BLE001
        return {}
    return {
        "evaluated": int(data.n_p_eval),
        "generated": int(data.n_eval),
        "eval_s": round((data.t_p_eval_ms + data.t_eval_ms) / 1000, 4),
    }
