"""Case files: a fixture file holding many cases, one a line (``.jsonl``) or one a row (``.csv``
with a header row), as eval tools keep their datasets.

Each case is named by its file and position, ``cases.jsonl:3`` (the file's line 3) or
``cases.csv:2`` (the second row after the header), and travels through the run as a path of that
name (:func:`case_ref`); :func:`split_case` takes it apart again. Blank lines are not cases. The file
is read whole once per change (size-bounded like every fixture) and at most :data:`MAX_CASES` cases
come out of one file.
"""

from __future__ import annotations

import csv
import io
import os
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from needle_action.core.errors import ConfigError
from needle_action.core.paths import display_path, read_text

# a fixture is the variables of one request: 10 MB is already far beyond any model's context
# window, and keeps the slowest parser (pure-Python YAML, ~1.3 MB/s) under 10 s
MAX_FIXTURE_BYTES = 10_000_000
MAX_CASES = 1000  # cases one file gives: each is rendered and counted on every run
CASE_FILE_SUFFIXES = (".jsonl", ".csv")
_CASE_REF = re.compile(r"^(?P<file>.+\.(?:jsonl|csv)):(?P<n>[1-9][0-9]*)$", re.IGNORECASE)


def is_case_file(path: str | os.PathLike[str]) -> bool:
    """Whether PATH (a file, not a case of it) is a ``.jsonl`` or ``.csv`` case file."""
    return Path(path).suffix.lower() in CASE_FILE_SUFFIXES


def case_ref(path: Path, number: int) -> Path:
    """The name case NUMBER of the case file PATH travels under: ``PATH:NUMBER``."""
    return path.with_name(f"{path.name}:{number}")


def split_case(path: str | os.PathLike[str]) -> tuple[Path, int | None]:
    """(the file, the case's number) of a case name; (PATH, None) for any other path."""
    m = _CASE_REF.match(os.fspath(path))
    if m is None:
        return Path(path), None
    return Path(m.group("file")), int(m.group("n"))


@dataclass(frozen=True)
class Case:
    """One case of a case file: its number (line or row), the line it starts on, its text or
    cells, and for a CSV the header."""

    number: int
    line: int
    text: str = ""
    header: tuple[str, ...] = ()
    cells: tuple[str, ...] = ()


def read_cases(path: Path) -> list[Case]:
    """The cases of the case file PATH (ConfigError at file:line for what cannot be one)."""
    stat = path.stat()
    return list(_cached_cases(str(path.resolve()), stat.st_mtime_ns, stat.st_size, display_path(path)))


@lru_cache(maxsize=8)
def _cached_cases(real: str, _mtime: int, _size: int, file: str) -> tuple[Case, ...]:
    text = read_text(Path(real), what="fixture", file=file, max_bytes=MAX_FIXTURE_BYTES)
    cases = _csv_cases(text, file) if real.lower().endswith(".csv") else _jsonl_cases(text)
    if not cases:
        raise ConfigError(
            "the case file holds no case: it is empty" + (" but for its header" if text.strip() else ""),
            file=file,
            line=1,
            hint="write one case a line (.jsonl) or a row after the header (.csv), or remove it from fixtures",
        )
    if len(cases) > MAX_CASES:
        raise ConfigError(
            f"the case file holds {len(cases):,} cases; at most {MAX_CASES:,} are measured from one file",
            file=file,
            line=cases[MAX_CASES].line,
            hint="every case is rendered and counted on every run: keep a representative few hundred",
        )
    return tuple(cases)


def _jsonl_cases(text: str) -> list[Case]:
    return [
        Case(number=i, line=i, text=line)
        for i, line in enumerate(text.lstrip("\ufeff").split("\n"), start=1)
        if line.strip()
    ]


def _csv_cases(text: str, file: str) -> list[Case]:
    reader = csv.reader(io.StringIO(text.lstrip("\ufeff"), newline=""))
    try:
        header = tuple(h.strip() for h in next(reader, []))
        _check_header(header, file)
        out: list[Case] = []
        start = reader.line_num + 1
        for row in reader:
            if any(cell.strip() for cell in row):
                if len(row) != len(header):
                    raise ConfigError(
                        f"this row has {len(row)} cells; the header names {len(header)} columns",
                        file=file,
                        line=start,
                        hint="quote cells that hold commas or line breaks with double quotes",
                    )
                out.append(Case(number=len(out) + 1, line=start, header=header, cells=tuple(row)))
            start = reader.line_num + 1
    except csv.Error as exc:
        raise ConfigError(
            f"CSV syntax error in fixture: {exc}", file=file, line=reader.line_num or None
        ) from None
    return out


def _check_header(header: tuple[str, ...], file: str) -> None:
    if not header or not any(header):
        raise ConfigError(
            "a CSV fixture starts with a header row naming the variables",
            file=file,
            line=1,
            hint="write e.g. `question,documents` on the first line, then one case a row",
        )
    for name in header:
        if not name or header.count(name) > 1:
            raise ConfigError(
                f"the header's column {name!r} is " + ("empty" if not name else "named twice"),
                file=file,
                line=1,
                hint="each column of the header row names one variable of the template",
            )


__all__ = [
    "CASE_FILE_SUFFIXES",
    "MAX_CASES",
    "MAX_FIXTURE_BYTES",
    "Case",
    "case_ref",
    "is_case_file",
    "read_cases",
    "split_case",
]
