"""Running queries against a dataset so that a hostile query can neither change anything, nor
read a file, nor hang or crash the run.

Threat model. The query text is untrusted (a model wrote it). What holds it:

* DuckDB: the database file is opened read-only with ``enable_external_access = false`` (no
  file, URL, ``ATTACH``, ``COPY`` or extension install), extension autoloading off,
  ``lock_configuration = true`` (no ``SET`` can undo any of this), a memory limit and no
  spilling to disk. A timer calls ``interrupt()`` on the query's own cursor at the timeout.
* SQLite: opened read-only through a ``mode=ro`` URI, with an authorizer that allows reads,
  functions and recursive CTEs only (``load_extension``, ``readfile``... refused), and a
  progress handler that aborts the statement at the timeout. SQLite has no memory limit: a
  query that builds huge values within its time can use memory until the timeout.
* Both: at most ``max_rows + 1`` rows are fetched, and :mod:`practicum.domains.sql.guard` has
  refused writes, files and extensions before the query got here.

Not isolated: CPU and memory within the limits above are the process's own. Each query runs in
its own cursor (DuckDB) or connection (SQLite), in the calling thread; callers run them in a
thread pool so the event loop never waits on a query.

A query that fails (syntax, type error, timeout, memory) raises :class:`QueryFailed`, which
callers turn into a tool observation or a 0 score; it never escapes the verifier.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol

import duckdb

from practicum.domains.sql.datasets import database

EngineName = Literal["duckdb", "sqlite"]


@dataclass(frozen=True)
class ResultSet:
    columns: list[str]
    rows: list[tuple[Any, ...]]
    truncated: bool  # the query had more rows than the cap; ``rows`` holds the first ``cap``


class QueryFailed(Exception):
    """A query ran and failed: ``kind`` is ``error``, ``timeout`` or ``memory``."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


@dataclass(frozen=True)
class Column:
    name: str
    type: str


class Database(Protocol):
    dataset: str
    engine: EngineName
    dialect: str  # sqlglot's name for the engine's SQL
    tables: dict[str, list[Column]]  # canonical table name -> its columns, in order

    def run(self, sql: str, timeout_s: float, max_rows: int) -> ResultSet: ...


class DuckDatabase:
    engine: EngineName = "duckdb"
    dialect = "duckdb"

    def __init__(self, dataset: str, path: Path, memory_limit: str = "1GB", threads: int = 1) -> None:
        self.dataset = dataset
        config: dict[str, str | bool | int | float | list[str]] = {"enable_external_access": False, "autoload_known_extensions": False,
                  "autoinstall_known_extensions": False, "allow_community_extensions": False,
                  "memory_limit": memory_limit, "max_temp_directory_size": "0B", "threads": threads,
                  "lock_configuration": True}
        self._con = duckdb.connect(str(path), read_only=True, config=config)
        self.tables: dict[str, list[Column]] = {}
        for table, col, typ in self._con.execute(
                "SELECT table_name, column_name, data_type FROM information_schema.columns "
                "ORDER BY table_name, ordinal_position").fetchall():
            self.tables.setdefault(table, []).append(Column(col, typ))

    def run(self, sql: str, timeout_s: float, max_rows: int) -> ResultSet:
        cur = self._con.cursor()
        timer = threading.Timer(timeout_s, cur.interrupt)
        timer.start()
        try:
            cur.execute(sql)
            columns = [d[0] for d in cur.description or []]
            rows = cur.fetchmany(max_rows + 1)
        except duckdb.InterruptException:
            raise QueryFailed("timeout", f"the query ran longer than {timeout_s:g} s and was stopped") from None
        except duckdb.OutOfMemoryException:
            raise QueryFailed("memory", "the query ran out of memory") from None
        except duckdb.Error as e:
            raise QueryFailed("error", _short(str(e))) from None
        finally:
            timer.cancel()
            cur.close()
        return ResultSet(columns, rows[:max_rows], len(rows) > max_rows)


_SQLITE_ALLOWED = {sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_FUNCTION, sqlite3.SQLITE_RECURSIVE}
_SQLITE_DENIED_FUNCTIONS = {"load_extension", "readfile", "writefile", "edit", "fts3_tokenizer"}


def _sqlite_authorizer(action: int, arg1: str | None, arg2: str | None, db: str | None, src: str | None) -> int:
    if action not in _SQLITE_ALLOWED:
        return sqlite3.SQLITE_DENY
    if action == sqlite3.SQLITE_FUNCTION and (arg2 or "").lower() in _SQLITE_DENIED_FUNCTIONS:
        return sqlite3.SQLITE_DENY
    return sqlite3.SQLITE_OK


class SqliteDatabase:
    engine: EngineName = "sqlite"
    dialect = "sqlite"

    def __init__(self, dataset: str, path: Path) -> None:
        self.dataset = dataset
        self.path = path
        self.tables: dict[str, list[Column]] = {}
        con = self._connect()
        try:
            con.set_authorizer(None)
            for (table,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name"):
                cols = con.execute(f'PRAGMA table_info("{table}")').fetchall()
                self.tables[table] = [Column(c[1], c[2]) for c in cols]
        finally:
            con.close()

    def _connect(self) -> sqlite3.Connection:
        con = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True)
        con.set_authorizer(_sqlite_authorizer)
        return con

    def run(self, sql: str, timeout_s: float, max_rows: int) -> ResultSet:
        con = self._connect()
        deadline = time.monotonic() + timeout_s
        con.set_progress_handler(lambda: int(time.monotonic() > deadline), 10_000)
        try:
            cur = con.execute(sql)
            columns = [d[0] for d in cur.description or []]
            rows = cur.fetchmany(max_rows + 1)
        except sqlite3.OperationalError as e:
            if time.monotonic() > deadline or "interrupted" in str(e):
                raise QueryFailed("timeout", f"the query ran longer than {timeout_s:g} s and was stopped") from None
            raise QueryFailed("error", _short(str(e))) from None
        except (sqlite3.Error, sqlite3.Warning, OverflowError, MemoryError) as e:
            raise QueryFailed("error", _short(str(e))) from None
        finally:
            con.close()
        return ResultSet(columns, rows[:max_rows], len(rows) > max_rows)


def _short(message: str, limit: int = 600) -> str:
    message = message.strip()
    return message if len(message) <= limit else message[:limit] + " ..."


_OPEN: dict[tuple[str, str, Path], Database] = {}
_OPEN_LOCK = threading.Lock()


def open_database(dataset: str, engine: EngineName, home: Path, memory_limit: str = "1GB") -> Database:
    """The dataset's database for an engine (built and cached on first use), shared by all
    callers in this process: one read-only connection per file, one cursor per query. DuckDB
    keeps one configuration per open file, so the first opener's ``memory_limit`` holds for the
    process."""
    key = (dataset, engine, Path(home))
    with _OPEN_LOCK:
        db = _OPEN.get(key)
        if db is None:
            path = database(dataset, engine, Path(home))
            db = DuckDatabase(dataset, path, memory_limit) if engine == "duckdb" else SqliteDatabase(dataset, path)
            _OPEN[key] = db
        return db
