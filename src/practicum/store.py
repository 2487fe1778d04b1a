"""The run's durable record: one SQLite file per run folder.

Tables: ``tasks`` (every task seen), ``groups`` (one row per group with its lifecycle state,
see :class:`~practicum.records.GroupState`), ``episodes`` (the full trajectory as JSON, plus
reward, state and domain as columns for queries), ``metrics`` (one JSON row per step and kind),
``meta`` (the config and run facts). WAL mode; every write is one transaction, so a crash
loses at most the group being written.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from practicum.errors import StoreError
from practicum.records import Episode, Group, GroupState, Task

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS tasks (id TEXT PRIMARY KEY, domain TEXT NOT NULL, json TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS groups (
    id TEXT PRIMARY KEY, task_id TEXT NOT NULL, domain TEXT NOT NULL, step INTEGER NOT NULL,
    kind TEXT NOT NULL, state TEXT NOT NULL, policy_version INTEGER NOT NULL,
    reward_mean REAL, created REAL NOT NULL, updated REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS episodes (
    id TEXT PRIMARY KEY, group_id TEXT NOT NULL, task_id TEXT NOT NULL, domain TEXT NOT NULL,
    state TEXT NOT NULL, reward REAL, n_errors INTEGER NOT NULL, json TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS metrics (step INTEGER NOT NULL, kind TEXT NOT NULL, time REAL NOT NULL, json TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS groups_step ON groups(step, kind);
CREATE INDEX IF NOT EXISTS episodes_group ON episodes(group_id);
"""


class Store:
    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.db = sqlite3.connect(self.path, isolation_level=None)
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute("PRAGMA synchronous=NORMAL")
            self.db.executescript(SCHEMA)
        except sqlite3.DatabaseError as e:
            raise StoreError(f"cannot open store {self.path}: {e}") from e

    def close(self) -> None:
        self.db.close()

    def _tx(self):
        return _Tx(self.db)

    # --- meta ---------------------------------------------------------------------------------
    def set_meta(self, key: str, value: Any) -> None:
        with self._tx():
            self.db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, json.dumps(value)))

    def get_meta(self, key: str, default: Any = None) -> Any:
        row = self.db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return json.loads(row[0]) if row else default

    # --- groups and episodes -------------------------------------------------------------
    def add_group(self, group: Group, step: int, kind: str = "train") -> None:
        now = time.time()
        rewards = group.rewards
        with self._tx():
            self._put_task(group.task)
            self.db.execute(
                "INSERT OR REPLACE INTO groups VALUES (?,?,?,?,?,?,?,?,?,?)",
                (group.id, group.task.id, group.task.domain, step, kind, group.state.value,
                 group.policy_version, sum(rewards) / len(rewards) if rewards else None, now, now),
            )
            for ep in group.episodes:
                self.db.execute(
                    "INSERT OR REPLACE INTO episodes VALUES (?,?,?,?,?,?,?,?)",
                    (ep.id, group.id, ep.task_id, ep.domain, ep.state.value,
                     ep.score.value if ep.score else None, len(ep.errors), ep.model_dump_json()),
                )

    def set_group_state(self, group_ids: list[str], state: GroupState) -> None:
        with self._tx():
            self.db.executemany(
                "UPDATE groups SET state = ?, updated = ? WHERE id = ?",
                [(state.value, time.time(), g) for g in group_ids],
            )

    def _put_task(self, task: Task) -> None:
        self.db.execute(
            "INSERT OR IGNORE INTO tasks VALUES (?,?,?)", (task.id, task.domain, task.model_dump_json())
        )

    def groups(self, step: int | None = None, kind: str | None = None, state: GroupState | None = None) -> list[Group]:
        q, args = "SELECT id, task_id, step, state, policy_version FROM groups WHERE 1=1", []
        if step is not None:
            q += " AND step = ?"
            args.append(step)
        if kind is not None:
            q += " AND kind = ?"
            args.append(kind)
        if state is not None:
            q += " AND state = ?"
            args.append(state.value)
        out = []
        for gid, task_id, st, state_v, ver in self.db.execute(q + " ORDER BY created, id", args).fetchall():
            (task_json,) = self.db.execute("SELECT json FROM tasks WHERE id = ?", (task_id,)).fetchone()
            eps = [Episode.model_validate_json(j) for (j,) in self.db.execute(
                "SELECT json FROM episodes WHERE group_id = ? ORDER BY rowid", (gid,))]
            out.append(Group(id=gid, task=Task.model_validate_json(task_json), episodes=eps,
                             state=GroupState(state_v), step=st, policy_version=ver))
        return out

    def episode(self, episode_id: str) -> Episode:
        row = self.db.execute("SELECT json FROM episodes WHERE id = ?", (episode_id,)).fetchone()
        if row is None:
            raise StoreError(f"no episode {episode_id} in {self.path}")
        return Episode.model_validate_json(row[0])

    def count(self, table: str) -> int:
        if table not in {"tasks", "groups", "episodes", "metrics"}:
            raise ValueError(table)
        return int(self.db.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0])

    def drop_after(self, step: int) -> int:
        """Forget groups and metrics of steps after ``step`` (a resume redoes them exactly)."""
        with self._tx():
            ids = [r[0] for r in self.db.execute("SELECT id FROM groups WHERE step > ?", (step,))]
            self.db.executemany("DELETE FROM episodes WHERE group_id = ?", [(i,) for i in ids])
            self.db.execute("DELETE FROM groups WHERE step > ?", (step,))
            self.db.execute("DELETE FROM metrics WHERE step > ?", (step,))
        return len(ids)

    # --- metrics ----------------------------------------------------------------------------
    def add_metrics(self, step: int, kind: str, values: dict[str, Any]) -> None:
        with self._tx():
            self.db.execute("INSERT INTO metrics VALUES (?,?,?,?)", (step, kind, time.time(), json.dumps(values)))

    def metrics(self, kind: str | None = None) -> Iterator[tuple[int, str, dict[str, Any]]]:
        q = "SELECT step, kind, json FROM metrics" + (" WHERE kind = ?" if kind else "") + " ORDER BY rowid"
        for step, k, j in self.db.execute(q, (kind,) if kind else ()):
            yield step, k, json.loads(j)


class _Tx:
    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db

    def __enter__(self) -> None:
        self.db.execute("BEGIN")

    def __exit__(self, exc_type, exc, tb) -> None:
        self.db.execute("ROLLBACK" if exc_type else "COMMIT")
