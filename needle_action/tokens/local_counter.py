"""The embedded model's own tokenizer (llama-cpp-python, vocabulary only), on exactly the text the
local provider feeds the model: the chat laid out by the gguf's chat template, or, for a base model
without one (the bundled Gemma 3 270M), the provider's plain transcript plus BOS.

llama_cpp is imported inside functions: it is an optional extra and slow to import.
"""

from __future__ import annotations

import atexit
import threading
from pathlib import Path
from typing import Any

from needle_action.config.model import PromptSettings, ProviderSettings
from needle_action.core.errors import ProviderUnavailable, TokenizerError
from needle_action.providers.local import model as local_model
from needle_action.providers.local.text import transcript
from needle_action.providers.specs import spec
from needle_action.request.prompt import RenderedPrompt

_vocabs: dict[str, Any] = {}  # gguf path -> llama_cpp.Llama holding the vocabulary only
_vocabs_lock = threading.Lock()


def _load_vocab(path: str) -> Any:
    """The gguf's vocabulary only (no weights, so loading is quick), loaded once per file."""
    with _vocabs_lock:
        if path not in _vocabs:
            _vocabs[path] = _open_vocab(path)
        return _vocabs[path]


def _open_vocab(path: str) -> Any:
    # the [local] extra: heavy and optional, loaded only when counting with the local model
    from llama_cpp import Llama

    try:  # llama.cpp logs from C even with verbose=False; keep `needle budget`'s output clean
        from llama_cpp._utils import suppress_stdout_stderr
    except ImportError:  # private helper: fine to lose
        return Llama(model_path=path, vocab_only=True, verbose=False)
    with suppress_stdout_stderr(disable=False):
        return Llama(model_path=path, vocab_only=True, verbose=False)


@atexit.register
def _close_vocabs() -> None:
    # close them while llama_cpp still exists: at interpreter teardown its globals are gone and
    # llama.cpp's own finaliser fails with "'NoneType' object is not callable"
    for llama in _vocabs.values():
        llama.close()


class LocalCounter:
    """The embedded model's own tokenizer."""

    calls_api = False

    def __init__(self, *, model: str, settings: PromptSettings) -> None:
        try:
            import llama_cpp  # noqa: F401
        except ImportError:
            raise TokenizerError(
                'tokenizer "local" needs llama-cpp-python',
                hint="pip install 'needle-action[local]' (compiles llama.cpp, a few minutes), "
                'or use tokenizer = "tiktoken:o200k_base"',
            ) from None
        ps = settings.providers.get("local") or ProviderSettings()
        if ps.model_path:
            path = Path(ps.model_path)
        else:
            try:
                path = local_model.model_path()
            except ProviderUnavailable as exc:  # counting needs no provider: a setup error (exit 2)
                raise TokenizerError(exc.message, hint=exc.hint) from None
        if not Path(path).is_file():
            raise TokenizerError(
                f"local model file not found: {path}", hint="set [providers.local] model_path"
            )
        self.path = Path(path)
        self.name = f"local:{model}"
        self.cache_id = f"local:{self.path.resolve()}"
        self.exact = spec(settings.provider).exact_tokenizer == "local"
        self._llama = _load_vocab(str(self.path))
        self._lock = threading.Lock()  # llama.cpp's tokenizer context is not documented as thread-safe
        self._chat = _chat_formatter(self._llama)

    def _tokenize(self, data: bytes, *, special: bool) -> int:
        with self._lock:
            return len(self._llama.tokenize(data, add_bos=False, special=special))

    def count_texts(self, texts: list[str]) -> list[int]:
        return [self._tokenize(t.encode("utf-8"), special=False) for t in texts]

    def request_text(self, prompt: RenderedPrompt) -> tuple[str, bool]:
        """The text the local provider feeds the model, and whether it already holds the BOS."""
        messages = ([{"role": "system", "content": prompt.system}] if prompt.system else []) + [
            {"role": m.role, "content": m.text} for m in prompt.messages
        ]
        if self._chat is not None:  # the gguf's chat template writes its own <bos> and turn markers
            return self._chat(messages=messages).prompt, True
        # a base model (the bundled Gemma): the provider's plain transcript, llama.cpp prepends BOS
        return transcript(messages), False

    def count_prompt(self, prompt: RenderedPrompt) -> int:
        text, has_bos = self.request_text(prompt)
        # special=True like llama.cpp's completion call: marker text counts as the special token it is
        return self._tokenize(text.encode("utf-8"), special=True) + (0 if has_bos else 1)


def _chat_formatter(llama: Any) -> Any:
    template = (llama.metadata or {}).get("tokenizer.chat_template")
    if not template:
        return None
    # the [local] extra (see _open_vocab)
    from llama_cpp.llama_chat_format import Jinja2ChatFormatter

    def piece(token_id: int) -> str:
        piece: bytes = llama.detokenize([token_id], special=True)
        return piece.decode("utf-8", errors="ignore")

    return Jinja2ChatFormatter(
        template=template,
        eos_token=piece(llama.token_eos()),
        bos_token=piece(llama.token_bos()),
        add_generation_prompt=True,
    )
