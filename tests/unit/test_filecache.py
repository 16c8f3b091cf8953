"""The file cache: a value is read once per version of its file, and a new version (an edit, a
replaced file, a retargeted symlink) is read again; nothing else ever answers from it."""

from __future__ import annotations

import os

import pytest

from needle_action.core import filecache
from needle_action.core.filecache import FileCache, file_version


@pytest.fixture
def settled(monkeypatch):
    """Files as old as a checkout: no racy window (each test writes its files a moment before)."""
    monkeypatch.setattr(filecache, "RACY_NS", 0)


@pytest.fixture
def cache() -> FileCache[str]:
    return FileCache(entries=8, max_bytes=1_000_000)


@pytest.fixture
def one(tmp_path):
    """A file holding "one"."""
    path = tmp_path / "a.txt"
    path.write_text("one")
    return path


def _reader(path, reads: list[str]):
    def read() -> str:
        reads.append(os.fspath(path))
        return path.read_text()

    return read


def test_a_file_is_read_once_per_version(cache, one, settled):
    reads: list[str] = []
    assert [cache.get(one, _reader(one, reads)) for _ in range(5)] == ["one"] * 5
    assert len(reads) == 1


def test_an_edited_file_is_read_again(cache, one, settled):
    path, reads = one, []
    assert cache.get(path, _reader(path, reads)) == "one"
    path.write_text("three")  # a new size (and times)
    assert cache.get(path, _reader(path, reads)) == "three"
    os.utime(path, ns=(1_000_000_000, 1_000_000_000))  # the modification time set back
    assert cache.get(path, _reader(path, reads)) == "three"
    assert len(reads) == 3


def test_a_replaced_file_or_a_retargeted_symlink_is_read_again(tmp_path, cache, settled):
    reads: list[str] = []
    path, other = tmp_path / "a.txt", tmp_path / "b.txt"
    path.write_text("aaa")
    other.write_text("bbb")  # the same size
    link = tmp_path / "link.txt"
    link.symlink_to(path)
    assert cache.get(link, _reader(link, reads)) == "aaa"
    link.unlink()
    link.symlink_to(other)
    assert cache.get(link, _reader(link, reads)) == "bbb"
    new = tmp_path / "new.txt"
    new.write_text("ccc")
    os.replace(new, path)  # another inode under the same name
    assert cache.get(path, _reader(path, reads)) == "ccc"
    assert len(reads) == 3


def test_one_file_never_answers_for_another(tmp_path, cache, settled):
    reads: list[str] = []
    for name in ("a.txt", "b.txt"):
        (tmp_path / name).write_text("same")
    values = [cache.get(tmp_path / n, lambda n=n: n) for n in ("a.txt", "b.txt", "a.txt", "b.txt")]
    assert values == ["a.txt", "b.txt", "a.txt", "b.txt"]
    # EXTRA (what else the value depends on) is part of the key too
    path = tmp_path / "a.txt"
    assert cache.get(path, _reader(path, reads), extra="x") == "same"
    assert cache.get(path, lambda: "other", extra="y") == "other"


def test_a_fresh_file_is_read_every_time_until_its_version_is_old_enough(cache, one):
    # within the racy window a same-size edit could keep the version: nothing is stored
    reads: list[str] = []
    cache.get(one, _reader(one, reads))
    cache.get(one, _reader(one, reads))
    assert len(reads) == 2


def test_errors_are_not_stored(cache, one, settled):
    def fail() -> str:
        raise ValueError("bad file")

    for _ in range(2):
        with pytest.raises(ValueError, match="bad file"):
            cache.get(one, fail)
    assert cache.get(one, lambda: "good") == "good"


def test_what_is_not_a_regular_file_is_never_stored(tmp_path, cache, settled):
    calls: list[int] = []
    for path in (tmp_path, tmp_path / "missing.txt"):
        assert file_version(path) is None
        cache.get(path, lambda: str(calls.append(1)))
        cache.get(path, lambda: str(calls.append(1)))
    assert len(calls) == 4


def test_a_file_changed_while_read_is_not_stored(cache, one, settled):
    def read_then_edit() -> str:
        text = one.read_text()
        one.write_text("three")
        return text

    assert cache.get(one, read_then_edit) == "one"
    assert cache.get(one, one.read_text) == "three"  # not the "one" read from the old version


def test_entries_and_bytes_are_bounded(tmp_path, settled):
    cache: FileCache[str] = FileCache(entries=2, max_bytes=10)
    reads: list[str] = []
    for name in ("a", "b", "c"):
        (tmp_path / name).write_text("12345")
    for name in ("a", "b", "c", "a"):  # three files in two places: "a" was dropped for "c"
        cache.get(tmp_path / name, _reader(tmp_path / name, reads))
    assert [os.path.basename(r) for r in reads] == ["a", "b", "c", "a"]
    big = tmp_path / "big"
    big.write_text("x" * 11)  # larger than every entry together may be: read each time
    cache.get(big, _reader(big, reads))
    cache.get(big, _reader(big, reads))
    assert [os.path.basename(r) for r in reads][-2:] == ["big", "big"]


def test_clear_file_caches_forgets_every_value(cache, one, settled):
    reads: list[str] = []
    cache.get(one, _reader(one, reads))
    filecache.clear_file_caches()
    cache.get(one, _reader(one, reads))
    assert len(reads) == 2
