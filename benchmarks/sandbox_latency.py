"""Sandbox latency and throughput: how much a sandboxed execution costs.

Latency per execution (median and p99, host wall time around one awaited call), side by side
in one run, all running the same small Python program:

* ``fork server``        ``session.run_python`` in an open isolated session (the fast path);
* ``fresh sandboxed``    ``session.exec(["python", "-c", ...])``: a new interpreter in the same
                         isolated session;
* ``new session``        open an isolated session, run once, close it (fewer repetitions);
* ``plain subprocess``   ``python -c`` on the host with no sandbox at all (the reference).

Throughput: executions per second through the fork server at concurrency 1, 2 and 8, with a
``SandboxPool`` of that size, (a) each worker holding one session, (b) one-shot
``pool.run_python`` calls (each session emptied by ``reset`` after every call).

    python benchmarks/sandbox_latency.py                 # ~30 s
    python benchmarks/sandbox_latency.py --n 50 --seconds 1

Writes ``benchmarks/out/sandbox_latency.json`` and ``.md``. Not a test: figures depend on the
machine and its load (recorded with the results).
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
from collections.abc import Awaitable, Callable
from pathlib import Path

from practicum.sandbox import Limits, SandboxPool, get_sandbox

OUT = Path(__file__).resolve().parent / "out"
PROGRAM = "print(sum(i * i for i in range(1000)))"
EXPECTED = f"{sum(i * i for i in range(1000))}\n"


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, max(0, round(q / 100 * (len(xs) - 1))))]


async def timed(n: int, call: Callable[[], Awaitable[str]], warmup: int = 3) -> dict[str, float]:
    for _ in range(warmup):
        await call()
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        out = await call()
        times.append(time.perf_counter() - t0)
        assert out == EXPECTED, out
    return {"n": n, "median_ms": statistics.median(times) * 1e3, "p99_ms": pct(times, 99) * 1e3,
            "mean_ms": statistics.fmean(times) * 1e3, "min_ms": min(times) * 1e3}


async def latency(n: int) -> dict[str, dict[str, float]]:
    sandbox = get_sandbox()
    limits = Limits(timeout_s=30)
    sides: dict[str, dict[str, float]] = {}
    async with await sandbox.session(limits) as s:
        async def fork() -> str:
            return (await s.run_python(PROGRAM)).stdout

        async def fresh() -> str:
            return (await s.exec(["python", "-c", PROGRAM])).stdout

        sides["fork server"] = await timed(n, fork)
        sides["fresh sandboxed process"] = await timed(n, fresh)

    async def new_session() -> str:
        async with await sandbox.session(limits) as s2:
            return (await s2.run_python(PROGRAM)).stdout

    sides["new session + run"] = await timed(max(5, n // 10), new_session, warmup=1)

    async def plain() -> str:
        p = await asyncio.create_subprocess_exec(sys.executable, "-c", PROGRAM, stdout=asyncio.subprocess.PIPE)
        out, _ = await p.communicate()
        return out.decode()

    sides["plain subprocess (no sandbox)"] = await timed(n, plain)
    return sides


async def _loop(run_python: Callable[[str], Awaitable], deadline: float) -> int:
    """Run PROGRAM back to back until ``deadline``; how many runs."""
    done = 0
    while time.perf_counter() < deadline:
        r = await run_python(PROGRAM)
        assert r.stdout == EXPECTED, r
        done += 1
    return done


async def throughput(levels: list[int], seconds: float) -> list[dict[str, float]]:
    rows = []
    for c in levels:
        async with SandboxPool(size=c, limits=Limits(timeout_s=30)) as pool:
            # (a) each worker holds a session and runs executions back to back
            sessions = [await pool.session() for _ in range(c)]
            for s in sessions:
                await s.run_python(PROGRAM)
            t0 = time.perf_counter()
            counts = await asyncio.gather(*(_loop(s.run_python, t0 + seconds) for s in sessions))
            held = sum(counts) / (time.perf_counter() - t0)
            for s in sessions:
                await s.close()
            # (b) one-shot executions on the pool (a reset after each)
            t0 = time.perf_counter()
            counts = await asyncio.gather(*(_loop(pool.run_python, t0 + seconds) for _ in range(c)))
            oneshot = sum(counts) / (time.perf_counter() - t0)
        rows.append({"concurrency": c, "held_sessions_per_s": held, "pool_one_shot_per_s": oneshot})
    return rows


def machine() -> dict[str, object]:
    cpu = "unknown"
    try:
        cpu = next(line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                   if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    ok, why = get_sandbox().available()
    return {"cpu": cpu, "cores": os.cpu_count(), "python": platform.python_version(), "niceness": os.nice(0),
            "load_avg_1m": os.getloadavg()[0], "sandbox": why if ok else f"unavailable: {why}"}


def markdown(result: dict) -> str:
    m = result["machine"]
    lines = [
        "# Sandbox latency", "",
        f"{m['cpu']}, {m['cores']} cores, Python {m['python']}, niceness {m['niceness']}, "
        f"load average {m['load_avg_1m']:.2f} at the start; {m['sandbox']}.", "",
        f"Program: `{PROGRAM}`. Host wall time per awaited call.", "",
        "| side | n | median ms | p99 ms | mean ms |", "| --- | ---: | ---: | ---: | ---: |",
    ]
    for name, s in result["latency"].items():
        lines.append(f"| {name} | {s['n']} | {s['median_ms']:.2f} | {s['p99_ms']:.2f} | {s['mean_ms']:.2f} |")
    lines += ["", "| concurrency | executions/s, sessions held | executions/s, pool one-shot |", "| ---: | ---: | ---: |"]
    for r in result["throughput"]:
        lines.append(f"| {r['concurrency']} | {r['held_sessions_per_s']:.0f} | {r['pool_one_shot_per_s']:.0f} |")
    fork = result["latency"]["fork server"]["median_ms"]
    lines += ["", f"Target: fork-server median <= 3 ms: {'met' if fork <= 3 else 'NOT met'} ({fork:.2f} ms).", ""]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=200, help="executions per latency side")
    ap.add_argument("--seconds", type=float, default=3.0, help="duration of each throughput measurement")
    ap.add_argument("--concurrency", default="1,2,8", help="comma-separated pool sizes")
    ap.add_argument("--out", type=Path, default=OUT / "sandbox_latency.json")
    args = ap.parse_args()
    levels = [int(x) for x in args.concurrency.split(",")]
    result: dict = {"machine": machine(), "command": " ".join(sys.argv)}
    result["latency"] = asyncio.run(latency(args.n))
    result["throughput"] = asyncio.run(throughput(levels, args.seconds))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))
    md = markdown(result)
    args.out.with_suffix(".md").write_text(md)
    print(md)


if __name__ == "__main__":
    main()
