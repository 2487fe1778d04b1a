"""SQL verifier speed: verifications per second over the 169-task bank, as training runs them.

Every answer goes through :class:`practicum.domains.sql.SqlVerifier` on the DuckDB engine, off
the event loop (``asyncio.to_thread``), ``--concurrency`` at a time. Passes:

* ``gold, cold``     each task's gold query as the answer, gold results not cached yet: two
                     queries per verification (the first episode of a task);
* ``gold, warm``     the same with the gold results cached: one query per verification (every
                     later episode of the task, e.g. the rest of a GRPO group);
* ``wrong, warm``    ``SELECT * FROM (gold) OFFSET 1``: the same work, a wrong result (each must
                     score 0);
* ``refused``        a hard-coded ``VALUES`` answer per task: refused by the reader, never run.

Datasets are built (or found in the cache) and opened before timing starts.

    python benchmarks/sql_verify.py                  # ~30 s on 2 cores
    python benchmarks/sql_verify.py --concurrency 1

Writes ``benchmarks/out/sql_verify.json`` and ``.md``. Not a test: figures depend on the machine
and its load (the load average is recorded with the results).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

from practicum.domains.sql import SqlVerifier
from practicum.domains.sql.datasets import DATASETS
from practicum.domains.sql.tasks import builtin_tasks
from practicum.models import practicum_home

OUT = Path(__file__).resolve().parent / "out"


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, max(0, round(q / 100 * (len(xs) - 1))))]


async def run(concurrency: int) -> dict:
    tasks = builtin_tasks()
    verifier = SqlVerifier(practicum_home())
    t0 = time.perf_counter()
    for name in DATASETS:
        verifier.database(name)
    open_s = time.perf_counter() - t0
    slots = asyncio.Semaphore(concurrency)

    async def one(task, answer):
        async with slots:
            t = time.perf_counter()
            v = await verifier.verify(task, answer)
            return v, time.perf_counter() - t

    passes = [
        ("gold, cold", [(t, t.gold_sql, 1.0) for t in tasks]),
        ("gold, warm", [(t, t.gold_sql, 1.0) for t in tasks]),
        ("wrong, warm", [(t, f"SELECT * FROM ({t.gold_sql}) OFFSET 1", 0.0) for t in tasks]),
        ("refused", [(t, "SELECT * FROM (VALUES (1, 'a')) v(x, y)", 0.0) for t in tasks]),
    ]
    rows = []
    for name, jobs in passes:
        load = os.getloadavg()[0]
        t0 = time.perf_counter()
        results = await asyncio.gather(*(one(t, a) for t, a, _ in jobs))
        wall = time.perf_counter() - t0
        lat = [s for _, s in results]
        wrong = [t.id for (t, _, want), (v, _) in zip(jobs, results) if v.score.value != want]
        rows.append({"pass": name, "answers": len(jobs), "wall_s": round(wall, 2),
                     "answers_per_s": round(len(jobs) / wall, 1), "median_ms": round(1000 * statistics.median(lat), 1),
                     "p90_ms": round(1000 * pct(lat, 90), 1), "max_ms": round(1000 * max(lat), 1),
                     "wrong": wrong, "load_avg_before": round(load, 2)})
        print(f"{name}: {len(jobs)} answers in {wall:.2f} s ({len(jobs) / wall:.1f}/s), "
              f"{len(wrong)} scored wrongly", flush=True)
    return {"machine": {"cpus": len(os.sched_getaffinity(0)), "python": platform.python_version(),
                        "platform": platform.platform()},
            "concurrency": concurrency, "open_s": round(open_s, 2),
            "command": " ".join([Path(sys.executable).name, *sys.argv]), "passes": rows}


def markdown(res: dict) -> str:
    lines = [
        f"SQL verifier on the {res['passes'][0]['answers']}-task bank (DuckDB), concurrency {res['concurrency']}, "
        f"{res['machine']['cpus']} CPUs (`{res['command']}`); datasets opened in {res['open_s']} s.",
        "",
        "| pass | answers | wall s | answers/s | median ms | p90 ms | max ms | scored wrongly | load avg |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in res["passes"]:
        lines.append(f"| {r['pass']} | {r['answers']} | {r['wall_s']} | {r['answers_per_s']} | {r['median_ms']} | "
                     f"{r['p90_ms']} | {r['max_ms']} | {len(r['wrong'])} | {r['load_avg_before']} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--concurrency", type=int, default=2, help="verifications in flight at once (default 2)")
    args = ap.parse_args()
    res = asyncio.run(run(args.concurrency))
    OUT.mkdir(exist_ok=True)
    (OUT / "sql_verify.json").write_text(json.dumps(res, indent=2))
    (OUT / "sql_verify.md").write_text(markdown(res))
    print(markdown(res))


if __name__ == "__main__":
    main()
