"""The run's durable record: one SQLite file per run folder.

Tables: ``tasks`` (every task seen), ``groups`` (one row per group with its lifecycle state,
see :class:`~practicum.records.GroupState`, its draw index, attempts and the reason it was
dropped or failed), ``episodes`` (the full trajectory as JSON, plus reward, state, attempt and
domain as columns for queries), ``events`` (every lifecycle transition of a group or episode,
append-only: time, state, reason, step, policy version), ``metrics`` (one JSON row per step and
kind), ``meta`` (the config and run facts). WAL mode; every write is one transaction committed
when the transition happens, so a ``kill -9`` loses nothing that was recorded.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from practicum.errors import StoreError
from practicum.records import ACTIVE_EPISODE, Episode, EpisodeState, Group, GroupState, Task

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
CREATE TABLE IF NOT EXISTS events (
    time REAL NOT NULL, entity TEXT NOT NULL, id TEXT NOT NULL, group_id TEXT NOT NULL, state TEXT NOT NULL,
    reason TEXT NOT NULL, step INTEGER NOT NULL, version INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS groups_step ON groups(step, kind);
CREATE INDEX IF NOT EXISTS episodes_group ON episodes(group_id);
CREATE INDEX IF NOT EXISTS events_group ON events(group_id);
"""
# Columns added after the first version of the schema: (table, column, declaration).
MIGRATIONS = (
    ("groups", "draw", "INTEGER NOT NULL DEFAULT -1"),
    ("groups", "attempts", "INTEGER NOT NULL DEFAULT 1"),
    ("groups", "reason", "TEXT NOT NULL DEFAULT ''"),
    ("episodes", "attempt", "INTEGER NOT NULL DEFAULT 1"),
    ("episodes", "reason", "TEXT NOT NULL DEFAULT ''"),
)
GROUP_COLS = ("id, task_id, domain, step, kind, state, policy_version, reward_mean, created, updated, draw, attempts, "
              "reason")
EPISODE_COLS = "id, group_id, task_id, domain, state, reward, n_errors, json, attempt, reason"


class Store:
    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.db = sqlite3.connect(self.path, isolation_level=None)
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute("PRAGMA synchronous=NORMAL")
            self.db.executescript(SCHEMA)
            for table, column, decl in MIGRATIONS:
                have = {r[1] for r in self.db.execute(f"PRAGMA table_info({table})")}
                if column not in have:
                    self.db.execute(f"ALTER TABLE {table} ADD COLUMN {column} {decl}")
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
            self._put_group(group, step, kind, now, rewards)
            for ep in group.episodes:
                self._put_episode(ep, group.id)

    def _put_group(self, group: Group, step: int, kind: str, now: float, rewards: list[float]) -> None:
        created = self.db.execute("SELECT created FROM groups WHERE id = ?", (group.id,)).fetchone()
        self.db.execute(
            f"INSERT OR REPLACE INTO groups ({GROUP_COLS}) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (group.id, group.task.id, group.task.domain, step, kind, group.state.value, group.policy_version,
             sum(rewards) / len(rewards) if rewards else None, created[0] if created else now, now, group.draw,
             group.attempts, group.reason),
        )

    def _put_episode(self, ep: Episode, group_id: str) -> None:
        self.db.execute(
            f"INSERT OR REPLACE INTO episodes ({EPISODE_COLS}) VALUES (?,?,?,?,?,?,?,?,?,?)",
            (ep.id, group_id, ep.task_id, ep.domain, ep.state.value, ep.score.value if ep.score else None,
             len(ep.errors), ep.model_dump_json(), ep.attempt, ep.reason),
        )

    # --- the lifecycle (the orchestrator writes each transition when it happens) ----------------
    def record_group(self, group: Group, version: int, reason: str = "") -> None:
        """Write a group and every episode it holds as they are now, with one event for the
        group (and one per episode): a draw, a state change, a re-queue."""
        now = time.time()
        rewards = [e.reward for e in group.episodes if e.state in (EpisodeState.ready, EpisodeState.trained)]
        with self._tx():
            self._put_task(group.task)
            self._put_group(group, group.step, "train", now, rewards)
            self.db.execute("INSERT INTO events VALUES (?,?,?,?,?,?,?,?)",
                            (now, "group", group.id, group.id, group.state.value, reason or group.reason,
                             group.step, version))
            for ep in group.episodes:
                self._put_episode(ep, group.id)
                self.db.execute("INSERT INTO events VALUES (?,?,?,?,?,?,?,?)",
                                (now, "episode", ep.id, group.id, ep.state.value, ep.reason, group.step, version))

    def record_episode(self, ep: Episode, group_id: str, version: int, step: int = -1) -> None:
        """Write one episode's transition and its event. The trajectory's JSON is written when
        the episode settles (ready, failed...), not at every turn's transitions: a running
        episode's row only changes state."""
        now = time.time()
        with self._tx():
            if ep.state in ACTIVE_EPISODE and self.db.execute(
                    "UPDATE episodes SET state = ? WHERE id = ?", (ep.state.value, ep.id)).rowcount:
                pass
            else:
                self._put_episode(ep, group_id)
            self.db.execute("INSERT INTO events VALUES (?,?,?,?,?,?,?,?)",
                            (now, "episode", ep.id, group_id, ep.state.value, ep.reason, step, version))

    def record_event(self, entity: str, eid: str, state: str, reason: str, step: int, version: int,
                     group_id: str = "") -> None:
        """An event that is not a lifecycle transition: a group replayed (entity ``replay``), a
        curriculum decision (entity ``curriculum``: a drift reaction, a scaffold removed, a level
        changed). The audit reads them (:mod:`practicum.audit`)."""
        with self._tx():
            self.db.execute("INSERT INTO events VALUES (?,?,?,?,?,?,?,?)",
                            (time.time(), entity, eid, group_id, state, reason, step, version))

    def forget_episodes(self, group_id: str, keep: set[str]) -> None:
        """Delete the episode rows of a group except ``keep`` (a re-queued group's old attempts;
        their events stay)."""
        with self._tx():
            for (eid,) in self.db.execute("SELECT id FROM episodes WHERE group_id = ?", (group_id,)).fetchall():
                if eid not in keep:
                    self.db.execute("DELETE FROM episodes WHERE id = ?", (eid,))

    def events(self, group_id: str | None = None) -> list[tuple[float, str, str, str, str, str, int, int]]:
        q = "SELECT * FROM events" + (" WHERE group_id = ?" if group_id else "") + " ORDER BY rowid"
        return list(self.db.execute(q, (group_id,) if group_id else ()))

    def draws(self) -> list[tuple[str, int, str, int, str, int]]:
        """``(group id, draw, state, step, reason, attempts)`` of every drawn training group."""
        return list(self.db.execute(
            "SELECT id, draw, state, step, reason, attempts FROM groups WHERE kind = 'train' AND draw >= 0 ORDER BY draw"))

    def group(self, group_id: str) -> Group:
        found = self._groups("SELECT id, task_id, step, state, policy_version, draw, attempts, reason FROM groups "
                             "WHERE id = ?", [group_id])
        if not found:
            raise StoreError(f"no group {group_id} in {self.path}")
        return found[0]

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
        q, args = "SELECT id, task_id, step, state, policy_version, draw, attempts, reason FROM groups WHERE 1=1", []
        if step is not None:
            q += " AND step = ?"
            args.append(step)
        if kind is not None:
            q += " AND kind = ?"
            args.append(kind)
        if state is not None:
            q += " AND state = ?"
            args.append(state.value)
        return self._groups(q + " ORDER BY created, id", args)

    def _groups(self, q: str, args: list) -> list[Group]:
        out = []
        for gid, task_id, st, state_v, ver, draw, attempts, reason in self.db.execute(q, args).fetchall():
            (task_json,) = self.db.execute("SELECT json FROM tasks WHERE id = ?", (task_id,)).fetchone()
            eps = [Episode.model_validate_json(j) for (j,) in self.db.execute(
                "SELECT json FROM episodes WHERE group_id = ? ORDER BY rowid", (gid,))]
            out.append(Group(id=gid, task=Task.model_validate_json(task_json), episodes=eps,
                             state=GroupState(state_v), step=st, policy_version=ver, draw=draw, attempts=attempts,
                             reason=reason))
        return out

    def episode(self, episode_id: str) -> Episode:
        row = self.db.execute("SELECT json FROM episodes WHERE id = ?", (episode_id,)).fetchone()
        if row is None:
            raise StoreError(f"no episode {episode_id} in {self.path}")
        return Episode.model_validate_json(row[0])

    def count(self, table: str) -> int:
        if table not in {"tasks", "groups", "episodes", "metrics", "events"}:
            raise ValueError(table)
        return int(self.db.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0])

    def drop_after(self, step: int, kind: str | None = None) -> int:
        """Forget groups (of ``kind``, default all) and metrics of steps after ``step``."""
        with self._tx():
            where, args = "step > ?", [step]
            if kind is not None:
                where, args = "step > ? AND kind = ?", [step, kind]
            ids = [r[0] for r in self.db.execute(f"SELECT id FROM groups WHERE {where}", args)]
            self.db.executemany("DELETE FROM episodes WHERE group_id = ?", [(i,) for i in ids])
            self.db.execute(f"DELETE FROM groups WHERE {where}", args)
            self.db.execute("DELETE FROM metrics WHERE step > ?", (step,))
        return len(ids)

    def drop_metrics_after(self, step: int) -> None:
        with self._tx():
            self.db.execute("DELETE FROM metrics WHERE step > ?", (step,))

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
