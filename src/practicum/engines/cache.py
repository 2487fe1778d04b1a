"""A response cache: an evaluation re-run with the same model, prompts and sampling settings is free.

:class:`CachingEngine` wraps any engine. A completion is stored in a SQLite file under a key of
sha256(model key, prompt ids, sampling settings, n) where n counts the earlier identical prompts
of the same call (the k-th sample of a task is always the k-th, so n samples per task are n
distinct entries, and a re-run gets each back in order). The model key says which weights
answered (:func:`model_key`: the checkpoint's path and its weight files' sizes and times, or an
endpoint's URL and model name), so new weights never read old answers. Only generation is
skipped: environments and verifiers still run on the cached replies, so a changed verifier
changes the scores.

The file is bounded: every entry records its size and when it was last read or written (an
index of the two is all the bound reads), and on close the least recently used entries are deleted until the completions take at most ``max_bytes``
(an answer for weights that no longer exist is never read again, so it goes first). SQLite
reuses the freed pages, so the file stops growing at about the bound. A file from before the
bound gets the column on open (its old entries count as least recently used).
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
import time
from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch

from practicum.engines.base import Completion, Engine, EngineWrapper, SamplingParams


def model_key(path: str | Path) -> str:
    """Which weights: a folder's path with the size and mtime of every weight file in it."""
    p = Path(path)
    if not p.exists():
        return str(path)
    files = sorted(x for x in ([p] if p.is_file() else p.rglob("*")) if x.suffix in (".safetensors", ".bin", ".pt", ".gguf"))
    return json.dumps([str(p.resolve())] + [(x.name, x.stat().st_size, int(x.stat().st_mtime)) for x in files])


MAX_BYTES = 1 << 30  # the default bound: 1 GiB of completions


class CachingEngine(EngineWrapper):
    """``engine`` with a completion cache in ``path`` of at most ``max_bytes`` of completions (see the module)."""

    def __init__(self, engine: Engine, path: str | Path, key: str, max_bytes: int = MAX_BYTES) -> None:
        if max_bytes < 0:
            raise ValueError(f"the response cache's bound must be >= 0 bytes, got {max_bytes}")
        self.engine, self.key, self.max_bytes = engine, key, max_bytes
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        self.db = sqlite3.connect(str(path), check_same_thread=False)
        self.db.execute("CREATE TABLE IF NOT EXISTS completions (key TEXT PRIMARY KEY, completion TEXT NOT NULL, "
                        "used REAL NOT NULL DEFAULT 0, bytes INTEGER NOT NULL DEFAULT 0)")
        columns = {row[1] for row in self.db.execute("PRAGMA table_info(completions)")}
        if "used" not in columns:  # a file from before the bound
            self.db.execute("ALTER TABLE completions ADD COLUMN used REAL NOT NULL DEFAULT 0")
        if "bytes" not in columns:
            self.db.execute("ALTER TABLE completions ADD COLUMN bytes INTEGER NOT NULL DEFAULT 0")
            self.db.execute("UPDATE completions SET bytes = LENGTH(CAST(completion AS BLOB))")  # once
        # the bound reads this index alone (size and age of every entry), never the completions
        self.db.execute("CREATE INDEX IF NOT EXISTS completions_lru ON completions (used, bytes)")
        self.db.commit()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0
        self.pruned = 0  # entries deleted by the bound on close
        self._read: dict[str, float] = {}  # key -> when it was last read, not yet written

    def __getattr__(self, name: str) -> Any:  # usage and other extras of the engine underneath
        if name in ("engine", "key", "db", "max_bytes"):
            raise AttributeError(name)
        return getattr(self.engine, name)

    def _key(self, ids: list[int], params: SamplingParams, n: int) -> str:
        request = self.engine.renderer.request(ids) if hasattr(self.engine.renderer, "request") else ids
        blob = json.dumps([self.key, request, asdict(params) | {"keep_prefix": None}, n], sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()

    def _dump(self, c: Completion) -> str:
        dump = getattr(self.engine, "cache_payload", None)  # an engine whose ids mean something only in-process
        return json.dumps(dump(c) if dump is not None else asdict(c))

    def _load(self, text: str) -> Completion:
        load = getattr(self.engine, "from_cache", None)
        return load(json.loads(text)) if load is not None else Completion(**json.loads(text))

    async def generate(self, prompts: list[list[int]], params: SamplingParams) -> list[Completion]:
        seen: dict[str, int] = {}
        keys: list[str] = []
        for p in prompts:
            h = hashlib.sha256(json.dumps(p).encode()).hexdigest()
            seen[h] = seen.get(h, -1) + 1
            keys.append(self._key(p, params, seen[h]))
        with self._lock:
            marks = ",".join("?" * len(keys))
            rows = dict(self.db.execute(f"SELECT key, completion FROM completions WHERE key IN ({marks})", keys).fetchall())
            now = time.time()
            self._read.update((k, now) for k in rows)  # written with the bound on close: no commit per hit
        out: list[Completion | None] = [self._load(rows[k]) if k in rows else None for k in keys]
        todo = [i for i, c in enumerate(out) if c is None]
        self.hits += len(prompts) - len(todo)
        self.misses += len(todo)
        if todo:
            fresh = await self.engine.generate([prompts[i] for i in todo], params)
            with self._lock:
                now = time.time()
                dumps = [(keys[i], self._dump(c)) for i, c in zip(todo, fresh)]
                self.db.executemany("INSERT OR REPLACE INTO completions (key, completion, used, bytes) VALUES (?, ?, ?, ?)",
                                    [(k, d, now, len(d.encode())) for k, d in dumps])
                self.db.commit()
            for i, c in zip(todo, fresh):
                out[i] = c
        return [c for c in out if c is not None]

    def load_weights(self, state: Mapping[str, torch.Tensor], version: int) -> None:
        raise ValueError("a cached engine answers for fixed weights: build a new one (its model key) for new weights")

    def prune(self) -> int:
        """Record the reads since the last call, then delete the least recently used entries until
        the completions take at most ``max_bytes``; returns how many went."""
        with self._lock:
            self.db.executemany("UPDATE completions SET used = MAX(used, ?) WHERE key = ?",
                                [(t, k) for k, t in self._read.items()])
            self.db.commit()
            self._read.clear()
            total = self.db.execute("SELECT COALESCE(SUM(bytes), 0) FROM completions").fetchone()[0]
            if total <= self.max_bytes:
                return 0
            # oldest use first: an entry goes while what would remain with it still exceeds the bound
            gone = self.db.execute(
                "DELETE FROM completions WHERE rowid IN (SELECT rowid FROM (SELECT rowid, bytes, SUM(bytes) OVER "
                "(ORDER BY used, rowid ROWS UNBOUNDED PRECEDING) AS through FROM completions) WHERE ? - (through - bytes) > ?)",
                (total, self.max_bytes)).rowcount
            self.db.commit()
        self.pruned += gone
        return gone

    async def close(self) -> None:
        try:
            self.prune()
        finally:
            self.db.close()
            await self.engine.close()
