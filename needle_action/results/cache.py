"""A results cache: finished recall results keyed by their settings hash, in SQLite.

An unchanged prompt (same assembled text, fixture, provider, model, recall settings and seed) gives
the same settings hash, so its recall result can be reused at zero model calls: a rerun of
``needle recall``, or the base side of a pull request that did not touch the prompt.

SQLite in WAL mode with a busy timeout, so several processes (a matrix of CI jobs sharing a cache
folder, the base and head sides of the action) can read and write the same file safely. Only
complete results are stored; a partial run (cap reached, provider outage) is never cached.
"""

from __future__ import annotations

import sqlite3
import time
from contextlib import closing
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from needle_action.core import environment
from needle_action.core.errors import ConfigError
from needle_action.core.paths import UnsafePath, refuse_links
from needle_action.results import RecallResult

_SQLITE_FILES = ("", "-wal", "-shm", "-journal")
_SCHEMA = """
CREATE TABLE IF NOT EXISTS recall_results (
    settings_hash TEXT PRIMARY KEY,
    result_json   TEXT NOT NULL,
    created_at    REAL NOT NULL,
    pool_key      TEXT
)
"""
# pool_key was added later, so earlier runs of the same fingerprint can be found (recall/history.py);
# files written before it get the column on first open (NULL for old rows: never pooled)
_POOL_COLUMN = "ALTER TABLE recall_results ADD COLUMN pool_key TEXT"
_POOL_INDEX = "CREATE INDEX IF NOT EXISTS recall_results_pool ON recall_results (pool_key)"


def default_cache_path() -> Path:
    """``$NEEDLE_CACHE_DIR/recall.sqlite``, else under ``$XDG_CACHE_HOME`` or ``~/.cache``.

    Outside the repository on purpose: nothing to ignore in git, and the base branch's worktree
    and the head share it, so an unchanged prompt is measured once per machine.
    """
    return environment.cache_folder("needle-action") / "recall.sqlite"


class ResultCache:
    """``get(hash) -> RecallResult | None`` and ``put(result)``; one short connection per call,
    so an instance is safe to share between threads and processes."""

    def __init__(self, path: str | Path, *, timeout_s: float = 30.0) -> None:
        self.path = Path(path)
        self.timeout_s = timeout_s
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:  # SQLite opens by path: a symlinked database (or journal) would be written through
            refuse_links(self.path.parent, [self.path.name + s for s in _SQLITE_FILES])
        except UnsafePath as exc:
            raise ConfigError(
                f"the recall cache is not safe to open: {exc.strerror}",
                file=str(self.path),
                hint="remove the file, or point the cache somewhere else (--cache-dir / cache-dir)",
            ) from None
        with closing(self._connect()) as db:
            self._setup(db)

    def _setup(self, db: sqlite3.Connection) -> None:
        """WAL mode (persistent: readers never block the writer) and the table, once per file.

        Switching to WAL takes an exclusive lock and SQLite answers "database is locked" at once,
        without its busy handler, when another process is doing the same: measured with 8 processes
        opening a fresh file together (about 1 open in 40 failed). So retry within the timeout.
        """
        deadline = time.monotonic() + self.timeout_s
        while True:
            try:
                if db.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
                    db.execute("PRAGMA journal_mode=WAL")
                with db:
                    db.execute(_SCHEMA)
                    columns = {row[1] for row in db.execute("PRAGMA table_info(recall_results)")}
                    if "pool_key" not in columns:
                        try:
                            db.execute(_POOL_COLUMN)
                        except sqlite3.OperationalError as exc:  # another process added it first
                            if "duplicate column" not in str(exc):
                                raise
                    db.execute(_POOL_INDEX)
                return
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or time.monotonic() > deadline:
                    raise
                time.sleep(0.02)

    def _connect(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, timeout=self.timeout_s)
        db.execute(f"PRAGMA busy_timeout={int(self.timeout_s * 1000)}")
        return db

    def _query(self, sql: str, params: tuple[object, ...] = ()) -> list[Any]:
        """The rows SQL selects, on a connection of its own (closed after)."""
        with closing(self._connect()) as db:
            return db.execute(sql, params).fetchall()

    def get(self, settings_hash: str) -> RecallResult | None:
        rows = self._query("SELECT result_json FROM recall_results WHERE settings_hash = ?", (settings_hash,))
        found = _readable(rows)
        return found[0] if found else None

    def put(self, result: RecallResult) -> bool:
        """Store RESULT under its settings hash; partial results are refused (returns False)."""
        if result.partial:
            return False
        own = result.model_copy(update={"history": None})  # the pool is recomputed when read
        with closing(self._connect()) as db, db:
            db.execute(
                "INSERT OR REPLACE INTO recall_results (settings_hash, result_json, created_at, pool_key) "
                "VALUES (?, ?, ?, ?)",
                (result.settings_hash, own.model_dump_json(), time.time(), result.pool_key),
            )
        return True

    def pooled_with(self, pool_key: str) -> list[RecallResult]:
        """Every stored result with POOL_KEY (unreadable rows skipped), oldest first."""
        sql = "SELECT result_json FROM recall_results WHERE pool_key = ? ORDER BY created_at"
        return _readable(self._query(sql, (pool_key,)))

    def __len__(self) -> int:
        return int(self._query("SELECT COUNT(*) FROM recall_results")[0][0])


def _readable(rows: list[Any]) -> list[RecallResult]:
    """The results in ROWS (``(result_json,)``); a row an incompatible version wrote is skipped: a
    miss, which the next run overwrites."""
    out = []
    for (text,) in rows:
        try:
            out.append(RecallResult.model_validate_json(text))
        except ValidationError:
            continue
    return out
