"""The embedded model through llama-cpp-python: no key, no network, reproducible.

* Default model: the embedded Gemma 3 270M (:mod:`needle_action.providers.local.model`); any .gguf with
  ``providers.local.model_path``.
* The model runs in a **worker process** needle owns (:mod:`needle_action.providers.local.worker`):
  loaded once, reused by every call and provider of the process; a native crash (SIGSEGV, SIGILL,
  SIGABRT, an out-of-memory SIGKILL) restarts it, and past two restarts becomes
  ``ProviderUnavailable`` naming the signal: the run keeps what it measured. Before the first call
  on a machine the worker runs the self-test (:mod:`needle_action.providers.local.probe`).
* Two prompt formats, chosen from the GGUF metadata. A GGUF with a chat template (instruction
  models) gets the chat through that template. One without (base models, like the embedded
  ``google/gemma-3-270m``, which is the pretrained, not the ``-it``, checkpoint) gets a plain
  transcript ending in ``Answer:``: measured on the embedded model, a chat format makes it echo the
  prompt, while the transcript makes it answer. Its answer is the first non-empty line (a base
  model keeps writing the next "Question:" otherwise). The inference itself:
  :mod:`needle_action.providers.local.infer`, in the worker.
* Decoding is greedy (``temperature=0``). Shared prompt prefixes are not evaluated twice, and an
  answer still depends on the prompt alone: see :mod:`needle_action.providers.local.kv_reuse` (the KV
  state of the prefix shared with the previous prompt, cut to a multiple of the evaluation chunk,
  so every prompt is evaluated in the same chunks as from an empty state). ``sequential`` makes the
  scheduler ask trials in :func:`needle_action.recall.run.prefix.sequential_order`, so consecutive
  prompts share the longest prefix. Generation stops once the answer's first line is complete; a
  request identical to an earlier one gets that one's reply without the model.
* ``stats`` (:class:`LocalStats`) counts what the model did, from llama.cpp's own counters in the
  worker; ``NEEDLE_LOCAL_TRACE=1`` prints every call's counts on stderr.
* One inference at a time (the worker answers in order); calls wait in a thread
  (``asyncio.to_thread``) so the event loop stays free for the rest of the engine.
* Context: ``providers.local.n_ctx`` when set (fixed); otherwise start from the size the registry
  derives from the recall sizes and, when a prompt does not fit, reload with a larger window up to
  the model's training context. A prompt beyond that is refused with RequestRejected.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import sys
import time
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from needle_action.config import ProviderSettings
from needle_action.core import environment
from needle_action.core.dataformats import JSON
from needle_action.core.errors import ConfigError, ProviderUnavailable
from needle_action.providers.base import Breakpoint, Completion
from needle_action.providers.local.model import N_CTX_TRAIN, model_path
from needle_action.providers.local.probe import ensure_probed
from needle_action.providers.local.text import first_line, has_chat_template, round_ctx, transcript
from needle_action.providers.local.worker import ModelWorker, worker_for
from needle_action.request.prompt import RenderedPrompt

DEFAULT_MODEL = "gemma-3-270m"
DEFAULT_N_CTX = 4096
ANSWERS_KEPT = 512  # answers remembered per provider for a prompt asked again word for word
__all__ = [  # the prompt-text helpers live in local_text (the worker imports them); named here too
    "DEFAULT_MODEL",
    "DEFAULT_N_CTX",
    "LocalProvider",
    "LocalStats",
    "first_line",
    "has_chat_template",
    "round_ctx",
    "transcript",
]


# counters alike in form to bench/verdicts.py's Tally (`duplicates` pairs them); nothing shared
@dataclass
class LocalStats:
    """What the embedded model did for a provider's calls: the tokens it was sent, kept from the
    previous prompt's KV state, evaluated and generated (llama.cpp's own counters), and the time in
    llama.cpp, in the worker and around the whole call (pipes, pickling and waiting included)."""

    calls: int = 0
    repeated: int = 0  # calls answered from an earlier identical call (no model work)
    prompt_tokens: int = 0
    reused_tokens: int = 0
    evaluated_tokens: int = 0
    generated_tokens: int = 0
    eval_seconds: float = 0.0
    worker_seconds: float = 0.0
    call_seconds: float = 0.0

    def add(self, reply: dict[str, Any], call_seconds: float) -> None:
        """Count one worker reply (``usage``, ``reused``, ``evaluated``, ``generated``, ``eval_s``,
        ``seconds``) that took CALL_SECONDS end to end."""
        self.calls += 1
        self.repeated += int(bool(reply.get("repeated")))
        self.prompt_tokens += int((reply.get("usage") or {}).get("prompt_tokens") or 0)
        self.reused_tokens += int(reply.get("reused") or 0)
        self.evaluated_tokens += int(reply.get("evaluated") or 0)
        self.generated_tokens += int(reply.get("generated") or 0)
        self.eval_seconds += float(reply.get("eval_s") or 0.0)
        self.worker_seconds += float(reply.get("seconds") or 0.0)
        self.call_seconds += call_seconds


def trace_line(reply: dict[str, Any], call_seconds: float) -> str:
    """One call as ``NEEDLE_LOCAL_TRACE`` prints it."""
    prompt = int((reply.get("usage") or {}).get("prompt_tokens") or 0)
    if reply.get("repeated"):
        return f"local: {prompt} prompt tokens, asked before word for word: its answer again"
    return (
        f"local: {prompt} prompt tokens ({int(reply.get('reused') or 0)} reused, "
        f"{int(reply.get('evaluated') or 0)} evaluated), {int(reply.get('generated') or 0)} generated; "
        f"llama.cpp {float(reply.get('eval_s') or 0):.2f} s, worker {float(reply.get('seconds') or 0):.2f} s, "
        f"call {call_seconds:.2f} s"
    )


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
        self.stats = LocalStats()
        self._trace = environment.local_trace()
        self._answers: OrderedDict[str, dict[str, Any]] = OrderedDict()  # identical requests -> the reply
        self._worker: ModelWorker | None = None

    @property
    def reused_tokens(self) -> int:
        """Prompt tokens not evaluated thanks to a kept prefix, over this provider's calls."""
        return self.stats.reused_tokens

    def worker(self) -> ModelWorker:
        """The model worker of this provider's model file (the bundled model is assembled first)."""
        if self._worker is None:
            path = Path(self.model_path) if self.model_path else model_path()
            if not path.is_file():
                raise ProviderUnavailable(
                    f"local model file not found: {path}",
                    hint="check providers.local.model_path (a .gguf file)",
                )
            self._worker = worker_for(path)
        return self._worker

    def prestart(self) -> None:
        """Start the worker, its self-test and the model load in the background: the caller counts
        budgets meanwhile, and the first answer does not wait ~2 s for them (the demo's first call
        took 5.1 s, 2.9 s of it answering). A missing model file is left to the first call."""
        try:
            worker = self.worker()
        except ProviderUnavailable:
            return
        payload = {"model_path": worker.model_path, "n_ctx": self.n_ctx}

        def setup() -> None:
            started = time.perf_counter()
            ensure_probed(worker, n_ctx=self.n_ctx, bundled=not self.model_path)
            worker.request("load", payload)
            if self._trace:
                seconds = time.perf_counter() - started
                print(
                    f"local: model worker started and loaded in {seconds:.2f} s", file=sys.stderr, flush=True
                )

        worker.start_soon(setup)

    def messages(self, prompt: RenderedPrompt) -> list[JSON]:
        out = [{"role": "system", "content": prompt.system}] if prompt.system else []
        out += [{"role": m.role, "content": m.text} for m in prompt.messages]
        if not any(m["role"] == "user" for m in out):
            raise ConfigError(
                "the prompt has no user message to send",
                file=prompt.source or None,
                hint="a prompt needs at least one user turn besides the system text",
            )
        return out

    def _run(self, messages: list[JSON], max_output_tokens: int) -> JSON:
        """One answer from the worker (blocking): ``text`` and ``usage``. The first call of the
        process runs the self-test (cached per machine, build and model). A request identical to
        an earlier one (same messages, answer length and window) gets that one's reply: decoding
        is greedy and an answer depends on the prompt alone (kv_reuse.py), so the model would
        answer it the same (a gold needle's trials can be one prompt when the fixture fills the size)."""
        key = hashlib.sha256(json.dumps([messages, max_output_tokens, self.n_ctx]).encode()).hexdigest()
        started = time.perf_counter()
        reply = self._answers.get(key)
        if reply is not None:
            reply = {**reply, "repeated": True, "reused": 0, "evaluated": 0, "generated": 0}
            reply.update(eval_s=0.0, seconds=0.0)
        else:
            reply = self._ask(messages, max_output_tokens)
            self._answers[key] = reply
            while len(self._answers) > ANSWERS_KEPT:
                self._answers.popitem(last=False)
        seconds = time.perf_counter() - started
        self.stats.add(reply, seconds)
        if self._trace:
            print(trace_line(reply, seconds), file=sys.stderr, flush=True)
        return reply

    def _ask(self, messages: list[dict[str, Any]], max_output_tokens: int) -> dict[str, Any]:
        worker = self.worker()
        worker.wait_started()  # a prestart's self-test and load, if one runs
        ensure_probed(worker, n_ctx=self.n_ctx, bundled=not self.model_path)
        reply = worker.request(
            "complete",
            {
                "model_path": worker.model_path,
                "messages": messages,
                "max_output_tokens": max_output_tokens,
                "reuse_prefix": self.reuse_prefix,
                "n_ctx": self.n_ctx,
                "max_ctx": self.max_ctx,
                "fixed_ctx": self.fixed_ctx,
            },
        )
        self.n_ctx, self.max_ctx = int(reply["n_ctx"]), int(reply["max_ctx"])
        return reply

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
        """The worker stays up for later runs of this process (it stops at exit); a crash that made
        this run give up is forgotten, so a later run tries a fresh worker."""
        if self._worker is not None:
            self._worker.reset()
