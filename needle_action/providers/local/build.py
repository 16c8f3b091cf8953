"""What needle knows about the installed llama-cpp-python build: the CPU features compiled into it,
which of them are known to crash, and the commands that rebuild it portably.

llama-cpp-python compiles llama.cpp on install. Left to itself (``GGML_NATIVE=ON``) it uses every
instruction of the CPU it is built on; on Xeons with AMX that build took the AMX / AVX-512 BF16 /
VBMI kernels and segfaulted on the first decode (docs/decisions.md). The README's install sets
:data:`PORTABLE_CMAKE_ARGS` (AVX2 + FMA + F16C, x86-64-v3, no AVX-512, no AMX; arm64 builds ignore
the x86 switches) and ``--no-cache-dir`` (pip's wheel cache ignores ``CMAKE_ARGS`` and would hand
back an earlier native build). The features come from ``llama_print_system_info()``, read in the
model worker: this module never imports llama_cpp.
"""

from __future__ import annotations

import importlib.metadata
import re

PORTABLE_CMAKE_ARGS = "-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON"
# for a CPU without AVX2 (SIGILL with the portable build): SSE only, slower, runs anywhere on x86-64
BASELINE_CMAKE_ARGS = "-DGGML_NATIVE=OFF -DGGML_AVX=OFF -DGGML_AVX2=OFF -DGGML_FMA=OFF -DGGML_F16C=OFF"
# in the build that crashed and absent from the one that answered on the same Xeon (issue 17)
RISKY_FEATURES = ("AMX_INT8", "AVX512_BF16", "AVX512_VBMI")
_FEATURE = re.compile(r"\b([A-Z][A-Z0-9_]*)\s*=\s*1\b")
_CRASHES = ("SIGSEGV", "SIGBUS", "SIGABRT", "SIGFPE")


def build_features(system_info: str) -> list[str]:
    """The features a ``llama_print_system_info()`` line reports as on (``AVX2 = 1`` -> ``AVX2``)."""
    return list(dict.fromkeys(_FEATURE.findall(system_info)))


def risky_features(features: list[str]) -> list[str]:
    """The compiled-in features behind the known crash (AMX and the AVX-512 BF16/VBMI kernels)."""
    return [f for f in features if f in RISKY_FEATURES]


def installed_version() -> str | None:
    """llama-cpp-python's installed version (package metadata: no import), or None."""
    try:
        return importlib.metadata.version("llama-cpp-python")
    except importlib.metadata.PackageNotFoundError:
        return None


def reinstall_command(version: str | None, *, cmake_args: str = PORTABLE_CMAKE_ARGS) -> str:
    """The exact command that rebuilds llama-cpp-python (the same version) with CMAKE_ARGS:
    ``--force-reinstall`` because pip keeps an installed version, ``--no-cache-dir`` because its
    wheel cache would reuse the old build whatever CMAKE_ARGS says."""
    spec = f"llama-cpp-python=={version}" if version else "llama-cpp-python"
    return f'CMAKE_ARGS="{cmake_args}" python3 -m pip install --force-reinstall --no-deps --no-cache-dir "{spec}"'


def crash_hint(what: str, version: str | None) -> str:
    """What to do after the model worker died of WHAT (``SIGSEGV``, ``SIGKILL``, ``exit status 1``)."""
    if what == "SIGKILL":
        return (
            "the worker was killed, usually by the out-of-memory killer: use smaller recall sizes or "
            "providers.local.n_ctx, or free memory; `needle doctor` checks the model"
        )
    if what == "SIGILL":
        return (
            "llama.cpp used an instruction this CPU lacks (a build made on another machine, or a CPU "
            f"without AVX2): rebuild it here, `{reinstall_command(version)}` (no AVX2 at all: "
            f'CMAKE_ARGS="{BASELINE_CMAKE_ARGS}"), then run `needle doctor`'
        )
    if what in _CRASHES:
        return (
            "llama.cpp crashed in native code; the usual cause is a build for this CPU's newest "
            "instructions (AMX, AVX-512: docs/decisions.md). Rebuild it portably, "
            f"`{reinstall_command(version)}`, then run `needle doctor`"
        )
    return "run `needle doctor` to check the embedded model, or use another provider"
