"""Values read from files, computed once per version of the file in this process.

Recall renders one prompt hundreds of times, and each render used to read and parse the same
template, sample and parameter files again. A :class:`FileCache` keeps what was computed from a
file under its *version*: the name it was asked for (absolute) and, as ``os.stat`` sees the file
the name leads to now, its device, inode, size, modification and change times. An edit changes
the size or the times (the change time even when the modification time is set back), a symlink
retargeted or a file replaced changes the inode: any of them is a new version, read again.

A file's times tick with the kernel's clock (a few milliseconds on many kernels; a second or two
on some filesystems), so an edit of the same size within one tick of the last change would look
like the same version. As git does with "racily clean" files, a value read within
:data:`RACY_NS` of the file's last change is used but not stored: the file is read again until its
version is old enough that any later edit must change it.

The files come from pull requests, so the cache adds nothing a reader could use: only regular
files are cached (a FIFO, a folder or a missing file is read the plain way, which words its
error); a failure is never stored (the next call fails the same way, with the same message); a
value is stored only when the file's version is the same before and after it was read, so a file
edited while it was read is not pinned to what was read; the number of entries and the bytes of
the files behind them are bounded. Callers keep their own checks (confinement, size limits)
before they call :meth:`FileCache.get`.

The values are shared: a caller hands out copies (``copy.deepcopy``) or immutable values.
"""

from __future__ import annotations

import os
import stat
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

V = TypeVar("V")

Version = tuple[str, int, int, int, int, int]  # name, device, inode, size, mtime_ns, ctime_ns

# a version younger than this may change without changing (see the module docstring): 2 s covers
# the coarsest timestamps in use (FAT's); a checkout is older than that by the time a run reads it
RACY_NS = 2_000_000_000

_all: weakref.WeakSet[FileCache[object]] = weakref.WeakSet()


def file_version(path: str | os.PathLike[str]) -> Version | None:
    """PATH's version (see the module docstring); None when it is not a regular file now."""
    name = os.path.abspath(path)
    try:
        st = os.stat(name)
    except (OSError, ValueError):  # missing, unreadable folder, NUL in the name: not cached
        return None
    if not stat.S_ISREG(st.st_mode):
        return None
    return (name, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _racy(version: Version) -> bool:
    """Whether VERSION's file changed too recently for a same-size edit to change its times (the
    later of the two: on Windows the "change" time is the creation time)."""
    return time.time_ns() - max(version[4], version[5]) < RACY_NS


class FileCache(Generic[V]):
    """Values computed from files, at most ENTRIES of them, from files of at most MAX_BYTES in all."""

    def __init__(self, *, entries: int, max_bytes: int) -> None:
        self.entries, self.max_bytes = entries, max_bytes
        self._values: OrderedDict[tuple[Version, Hashable], V] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        # one reader per version at a time: concurrent renders of a cold prompt read it once
        self._reading: dict[tuple[Version, Hashable], threading.Lock] = {}
        _all.add(self)  # type: ignore[arg-type]

    def get(self, path: str | os.PathLike[str], read: Callable[[], V], extra: Hashable = None) -> V:
        """READ()'s value for the current version of PATH (READ reads PATH; EXTRA: whatever else
        the value depends on). Not a regular file: READ() every time, nothing stored."""
        version = file_version(path)
        if version is None:
            return read()
        key = (version, extra)
        with self._lock:
            if key in self._values:
                self._values.move_to_end(key)
                return self._values[key]
            reading = self._reading.setdefault(key, threading.Lock())
        with reading:
            try:
                with self._lock:
                    if key in self._values:  # another thread read it while this one waited
                        return self._values[key]
                value = read()
                if file_version(path) == version and not _racy(version):
                    self._store(key, value)  # unchanged while read, and old enough to be told apart
                return value
            finally:
                with self._lock:
                    self._reading.pop(key, None)

    def _store(self, key: tuple[Version, Hashable], value: V) -> None:
        size = key[0][3]
        if size > self.max_bytes:
            return
        with self._lock:
            if key in self._values:
                return
            self._values[key] = value
            self._bytes += size
            while len(self._values) > self.entries or self._bytes > self.max_bytes:
                old, _ = self._values.popitem(last=False)
                self._bytes -= old[0][3]

    def clear(self) -> None:
        """Forget every value."""
        with self._lock:
            self._values.clear()
            self._bytes = 0


def clear_file_caches() -> None:
    """Forget the values of every :class:`FileCache` (tests, and a long-lived process that wants
    the memory back)."""
    for cache in list(_all):
        cache.clear()


__all__ = ["FileCache", "Version", "clear_file_caches", "file_version"]
