"""The embedded model's self-test: a tiny completion in the model worker, with the build's features.

``needle doctor`` runs it on demand. The first use of the embedded model on a machine runs the same
probe before the first real call (in the worker the run then uses: no second load) and caches a
pass in ``<model cache folder>/probe.json``, keyed by llama-cpp-python's version, the build's
feature list and the model file, so later runs skip it; a new build or model probes again. A probe
that crashes the worker raises the worker's ``ProviderUnavailable`` (the signal named, the portable
reinstall command in its hint); one that answers nonsense on the bundled model fails the same way.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from needle_action.core.errors import ProviderUnavailable
from needle_action.providers.local import model as local_model
from needle_action.providers.local.build import (
    build_features,
    installed_version,
    reinstall_command,
    risky_features,
)
from needle_action.providers.local.worker import ModelWorker

PROBE_MESSAGES = [{"role": "user", "content": "Question: What is the capital of France?"}]
PROBE_EXPECTED = "paris"  # what the bundled Gemma 3 270M answers (checked only for the bundled model)
PROBE_N_CTX = 512


@dataclass
class ProbeResult:
    """One probe: the build, the answer, how long it took."""

    version: str
    features: list[str]
    answer: str
    seconds: float
    ok: bool
    risky: list[str] = field(default_factory=list)
    cached: bool = False


def probe_cache_path() -> Path:
    """``probe.json`` beside the assembled model (``$NEEDLE_CACHE_DIR/models`` or the XDG cache)."""
    return local_model.cache_dir() / "probe.json"


def model_identity(path: str) -> str:
    """The model file's sha256 when its verified note knows it (the bundled model), else its name,
    size and mtime (hashing a custom GGUF on every run would cost seconds)."""
    known = local_model.known_sha256(Path(path))
    if known:
        return known
    st = os.stat(path)
    return f"{Path(path).name}:{st.st_size}:{st.st_mtime_ns}"


def probe_key(info: dict[str, Any], model_id: str) -> str:
    """The cache key: llama-cpp-python's version, the compiled-in features, the model."""
    features = sorted(build_features(info.get("system_info", "")))
    raw = json.dumps([info.get("version", ""), features, model_id])
    return hashlib.sha256(raw.encode()).hexdigest()[:32]


def run_probe(worker: ModelWorker, *, n_ctx: int = PROBE_N_CTX, bundled: bool = True) -> ProbeResult:
    """Ask the worker's model the probe question now. Raises ProviderUnavailable when the worker
    cannot start or load the model, or crashes (after its restarts)."""
    started = time.perf_counter()
    info = worker.info()
    reply = worker.request(
        "complete",
        {
            "model_path": worker.model_path,
            "messages": PROBE_MESSAGES,
            "max_output_tokens": 8,
            "reuse_prefix": False,
            "n_ctx": n_ctx,
            "max_ctx": n_ctx,
            "fixed_ctx": True,
        },
    )
    answer = str(reply.get("text") or "").strip()
    features = build_features(info.get("system_info", ""))
    ok = PROBE_EXPECTED in answer.lower() if bundled else bool(answer)
    return ProbeResult(
        version=str(info.get("version") or installed_version() or ""),
        features=features,
        answer=answer,
        seconds=round(time.perf_counter() - started, 2),
        ok=ok,
        risky=risky_features(features),
    )


def wrong_answer(result: ProbeResult) -> ProviderUnavailable:
    """The error of a probe that answered, but not what the model answers on a sound build."""
    return ProviderUnavailable(
        f"the embedded model's self-test answered {result.answer[:60]!r} instead of Paris: "
        "the llama.cpp build computes wrong results on this CPU",
        hint=f"rebuild it portably: `{reinstall_command(result.version or None)}`, then run `needle doctor`",
    )


def ensure_probed(worker: ModelWorker, *, n_ctx: int, bundled: bool) -> None:
    """Before the first real call on a machine: the probe, unless a pass with this build and model
    is cached. Raises ProviderUnavailable when it fails."""
    if worker.probed:
        return
    key = probe_key(worker.info(), model_identity(worker.model_path))
    cache = _read_cache()
    if cache.get(key, {}).get("ok"):
        worker.probed = True
        return
    result = run_probe(worker, n_ctx=n_ctx, bundled=bundled)
    store(key, result)
    if not result.ok:
        raise wrong_answer(result)
    if result.risky:
        print(
            f"warning: llama-cpp-python was built with {', '.join(result.risky)}, a build known to crash "
            f"on some Xeons (it answered here). A portable build: {reinstall_command(result.version or None)}",
            file=sys.stderr,
            flush=True,
        )
    worker.probed = True


def store(key: str, result: ProbeResult) -> None:
    """Record RESULT under KEY (best effort: a read-only cache only means probing again next time)."""
    cache = _read_cache()
    cache[key] = {
        "ok": result.ok,
        "version": result.version,
        "features": result.features,
        "answer": result.answer,
        "seconds": result.seconds,
        "checked_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    path = probe_cache_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(cache, indent=1, sort_keys=True))
        os.replace(tmp, path)
    except OSError:
        pass


def cached_result(key: str) -> dict[str, Any] | None:
    """The stored probe of KEY, if any."""
    return _read_cache().get(key)


def _read_cache() -> dict[str, Any]:
    try:
        data = json.loads(probe_cache_path().read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}
