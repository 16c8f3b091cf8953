"""The model worker process: ``python -m needle_action.providers.local.serve``.

Reads pickled requests from stdin and writes pickled answers to its real stdout (fd 1 is pointed at
stderr, so llama.cpp's prints cannot corrupt them), one at a time, until its input closes (the
parent exited or stopped it). Requests: ``("ping", None)``, ``("info", None)`` (llama-cpp-python's
version and ``llama_print_system_info()``), ``("load", request)`` (:func:`.local_infer.load`: the
model, before the first answer), ``("complete", request)`` (:func:`.local_infer.complete`).
Answers: ``("ok", dict)`` or ``("error", class name, message, hint)``.

Only the standard library and :mod:`needle_action.core.errors` are imported up front: the worker starts
in ~0.1 s, and llama.cpp loads on the first request that needs it. The parent side, restarts and
crash reports: :mod:`needle_action.providers.local.worker`.
"""

from __future__ import annotations

import os
import signal
from typing import Any

from needle_action.core import pipes
from needle_action.core.errors import NeedleError, ProviderUnavailable


def build_info() -> dict[str, Any]:
    """llama-cpp-python's version, the CPU features compiled into its llama.cpp, and how many times
    this worker loaded a model."""
    try:
        import llama_cpp
    except ImportError:
        raise ProviderUnavailable(
            "llama-cpp-python is not installed", hint='pip install -e ".[local]" (see the README)'
        ) from None
    raw = llama_cpp.llama_print_system_info()
    text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)
    from needle_action.providers.local.model import loads  # llama_cpp is imported already

    return {"version": getattr(llama_cpp, "__version__", ""), "system_info": text.strip(), "loads": loads()}


def answer(request: tuple[Any, ...]) -> tuple[Any, ...]:
    """The answer tuple to one request; errors become data, never an exception."""
    kind, payload = request
    try:
        if kind == "ping":  # "are you up?": no llama.cpp involved
            return ("ok", {"pid": os.getpid()})
        if kind == "info":
            return ("ok", build_info())
        if kind in ("load", "complete"):
            from needle_action.providers.local import infer as local_infer  # llama.cpp: loaded on first use

            run = local_infer.load if kind == "load" else local_infer.complete
            return ("ok", run(payload))
        return ("error", "ProviderUnavailable", f"unknown request {kind!r}", None)
    except NeedleError as exc:
        return ("error", type(exc).__name__, exc.message, exc.hint)
    except Exception as exc:  # noqa: BLE001 - a Python error in the worker: the caller's outage
        return (
            "error",
            "ProviderUnavailable",
            f"the embedded model failed: {type(exc).__name__}: {exc}",
            None,
        )


def serve() -> None:
    """Answer requests from stdin until it closes."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    pipes.serve(answer)  # llama.cpp's prints go to stderr, never into an answer


if __name__ == "__main__":  # pragma: no cover - the worker process
    serve()
