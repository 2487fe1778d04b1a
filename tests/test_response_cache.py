"""The evaluation response cache keeps to its bound: least recently used replies go first, a
reply read again counts as used, and a file from before the bound opens and keeps its replies.
(A fake engine is the seam: what is under test is the cache; the CLI test in
test_eval_metrics runs it over the real model.)"""

from __future__ import annotations

import asyncio
import itertools
import json
import sqlite3
from dataclasses import asdict

import pytest

from practicum.engines import cache as cache_mod
from practicum.engines.base import Completion, SamplingParams
from practicum.engines.cache import CachingEngine


class Echo:
    """Answers prompt [n] with n x's, and counts what it generated."""

    renderer = None
    policy_version = 0

    def __init__(self) -> None:
        self.generated: list[list[int]] = []

    async def generate(self, prompts, params):
        self.generated += prompts
        return [Completion(ids=[1], logprobs=[0.0], text="x" * p[0], finish_reason="stop", policy_version=0) for p in prompts]

    async def close(self) -> None:
        pass


def size(n: int) -> int:
    """Bytes the cache stores for the reply to [n]."""
    return len(json.dumps(asdict(Completion(ids=[1], logprobs=[0.0], text="x" * n, finish_reason="stop",
                                            policy_version=0))).encode())


@pytest.fixture
def clock(monkeypatch):
    ticks = itertools.count(1)
    monkeypatch.setattr(cache_mod.time, "time", lambda: float(next(ticks)))


def ask(engine: CachingEngine, *ns: int) -> list[str]:
    return [c.text for c in asyncio.run(engine.generate([[n] for n in ns], SamplingParams(max_new_tokens=4)))]


def test_the_least_recently_used_replies_go_first_and_a_read_counts_as_use(tmp_path, clock):
    path = tmp_path / "cache.sqlite"
    inner = Echo()
    engine = CachingEngine(inner, path, "model-a", max_bytes=size(100) + size(300))
    ask(engine, 100)  # written first
    ask(engine, 200)
    ask(engine, 300)
    assert ask(engine, 100) == ["x" * 100] and engine.hits == 1  # read again: 200 is now the least recently used
    asyncio.run(engine.close())
    assert engine.pruned == 1  # 200 alone is enough: 100 + 300 fit the bound exactly

    again = Echo()
    engine = CachingEngine(again, path, "model-a", max_bytes=size(100) + size(300))
    assert ask(engine, 300) == ["x" * 300]  # from the file: used now
    assert ask(engine, 200) == ["x" * 200]  # pruned before: generated again, later
    assert ask(engine, 100) == ["x" * 100]  # from the file, last
    assert again.generated == [[200]]
    asyncio.run(engine.close())
    assert engine.pruned == 1  # 300, the oldest; 100 + 200 then fit
    rows = sqlite3.connect(path).execute("SELECT completion, bytes FROM completions ORDER BY used").fetchall()
    assert [(json.loads(c)["text"], b) for c, b in rows] == [("x" * 200, size(200)), ("x" * 100, size(100))]


def test_a_bound_of_zero_empties_the_file_and_a_negative_one_is_refused(tmp_path, clock):
    engine = CachingEngine(Echo(), tmp_path / "c.sqlite", "m", max_bytes=0)
    ask(engine, 5, 6)
    assert engine.prune() == 2 and engine.prune() == 0
    asyncio.run(engine.close())
    with pytest.raises(ValueError, match=">= 0 bytes"):
        CachingEngine(Echo(), tmp_path / "d.sqlite", "m", max_bytes=-1)


def test_a_file_from_before_the_bound_keeps_its_replies(tmp_path, clock):
    path = tmp_path / "old.sqlite"
    first = CachingEngine(Echo(), path, "m")
    ask(first, 7)
    (key, completion), = first.db.execute("SELECT key, completion FROM completions").fetchall()
    asyncio.run(first.close())
    path.unlink()
    old = sqlite3.connect(path)  # the schema before the bound: no `used` column
    old.execute("CREATE TABLE completions (key TEXT PRIMARY KEY, completion TEXT NOT NULL)")
    old.execute("INSERT INTO completions VALUES (?, ?)", (key, completion))
    old.commit()
    old.close()
    inner = Echo()
    engine = CachingEngine(inner, path, "m")
    assert ask(engine, 7) == ["x" * 7] and inner.generated == [] and engine.hits == 1
    asyncio.run(engine.close())
    used, stored = sqlite3.connect(path).execute("SELECT used, bytes FROM completions").fetchone()
    assert used > 0 and stored == size(7)  # the read marked it used; its size was measured on opening
