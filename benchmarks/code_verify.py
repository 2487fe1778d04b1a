"""Code verifier speed: all 164 HumanEval canonical solutions and all 164 bare prompts.

Every answer goes through :class:`practicum.verify.code.CodeVerifier` exactly as in training:
two sandbox sessions from a ``SandboxPool`` (the solution's worker in one, the hidden tests'
harness in the other), concurrency ``--concurrency``. Passes:

* ``canonical + bare``  the target (under 20 s on 2 cores): 164 prompt+canonical_solution
  answers (each must score 1) and 164 bare prompts (each must score 0; a bare prompt is a
  stub, recognised without running it), with a cold round-0 cache (the first verification of
  a task runs the harness once more to learn which calls its tests make);
* ``canonical again``   the same 164 with the round-0 cache warm, as when a task is verified
  for each episode of a group;
* ``stub bodies``       164 wrong answers that the verifier must run: the prompt with
  ``return None`` as the body (none may pass all its tests; a few pass some asserts, such as
  ``assert not candidate(...)``, which the default fraction scoring credits).

    python benchmarks/code_verify.py                    # ~30 s on 2 cores
    python benchmarks/code_verify.py --concurrency 8 --passes canonical+bare

Writes ``benchmarks/out/code_verify.json`` and ``.md``. Not a test: figures depend on the
machine and its load (the load average is recorded with the results).
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

from practicum.domains.code.tasks import humaneval_tasks
from practicum.sandbox import SandboxPool, get_sandbox
from practicum.verify import CodeVerifier, VerifyConfig

OUT = Path(__file__).resolve().parent / "out"
PASSES = ("canonical+bare", "canonical again", "stub bodies")


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, max(0, round(q / 100 * (len(xs) - 1))))]


async def run(concurrency: int, passes: list[str]) -> dict:
    tasks = humaneval_tasks()
    config = VerifyConfig()
    rows = []
    # wired as training wires the code domain: solutions and graders in separate pools
    sandbox = get_sandbox("auto")
    async with SandboxPool(sandbox, size=concurrency, limits=config.limits) as pool, \
            SandboxPool(sandbox, size=concurrency, limits=config.limits) as graders:
        verifier = CodeVerifier(pool, config, graders=graders)
        slots = asyncio.Semaphore(concurrency)

        async def one(task, answer):
            async with slots:
                t0 = time.perf_counter()
                v = await verifier.verify(task.hidden(), answer)
                return v, time.perf_counter() - t0

        for name in passes:
            if name == "canonical+bare":
                jobs = [(t, t.correct_solution, 1.0) for t in tasks] + [(t, t.prompt, 0.0) for t in tasks]
            elif name == "canonical again":
                jobs = [(t, t.correct_solution, 1.0) for t in tasks]
            else:
                jobs = [(t, t.prompt + "    return None\n", 0.0) for t in tasks]
            load = os.getloadavg()[0]
            t0 = time.perf_counter()
            results = await asyncio.gather(*(one(t, a) for t, a, _ in jobs))
            wall = time.perf_counter() - t0
            lat = [s for _, s in results]
            # canonical: score 1; bare prompts: score 0; stub bodies: not all tests passed
            key = "all_passed" if name == "stub bodies" else None
            wrong = [t.id for (t, _, want), (v, _) in zip(jobs, results)
                     if (v.score.components.get(key, 0.0) if key else v.score.value) != want]
            rows.append({
                "pass": name, "answers": len(jobs), "wall_s": round(wall, 2),
                "answers_per_s": round(len(jobs) / wall, 1),
                "median_ms": round(1000 * statistics.median(lat), 1), "p90_ms": round(1000 * pct(lat, 90), 1),
                "max_ms": round(1000 * max(lat), 1),
                "rounds": dict(sorted(_count(v.rounds for v, _ in results).items())),
                "mean_score": round(statistics.mean(v.score.value for v, _ in results), 4),
                "wrong": wrong, "load_avg_before": round(load, 2),
            })
            print(f"{name}: {len(jobs)} answers in {wall:.2f} s, {len(wrong)} scored wrongly", flush=True)
        started, reused = pool.started + graders.started, pool.reused + graders.reused
    return {
        "machine": {"cpus": len(os.sched_getaffinity(0)), "python": platform.python_version(),
                    "platform": platform.platform()},
        "concurrency": concurrency, "sessions_started": started, "sessions_reused": reused,
        "command": " ".join([Path(sys.executable).name, *sys.argv]), "passes": rows,
    }


def _count(xs) -> dict:
    out: dict = {}
    for x in xs:
        out[x] = out.get(x, 0) + 1
    return out


def markdown(res: dict) -> str:
    lines = [
        f"Code verifier on HumanEval, concurrency {res['concurrency']}, {res['machine']['cpus']} CPUs "
        f"(`{res['command']}`); sessions started {res['sessions_started']}, reused {res['sessions_reused']}.",
        "",
        "| pass | answers | wall s | answers/s | median ms | p90 ms | max ms | harness rounds | mean score | scored wrongly | load avg |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in res["passes"]:
        rounds = ", ".join(f"{k}: {v}" for k, v in r["rounds"].items())
        lines.append(f"| {r['pass']} | {r['answers']} | {r['wall_s']} | {r['answers_per_s']} | {r['median_ms']} | "
                     f"{r['p90_ms']} | {r['max_ms']} | {rounds} | {r['mean_score']} | {len(r['wrong'])} | {r['load_avg_before']} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--concurrency", type=int, default=4, help="verifications at once (and pool size)")
    ap.add_argument("--passes", default=",".join(PASSES), help=f"comma-separated, from: {', '.join(PASSES)}")
    args = ap.parse_args()
    passes = [p.strip() for p in args.passes.split(",") if p.strip()]
    unknown = [p for p in passes if p not in PASSES]
    if unknown:
        ap.error(f"unknown passes {unknown}")
    res = asyncio.run(run(args.concurrency, passes))
    OUT.mkdir(exist_ok=True)
    (OUT / "code_verify.json").write_text(json.dumps(res, indent=2) + "\n")
    md = markdown(res)
    (OUT / "code_verify.md").write_text(md)
    print(md)
    if any(r["wrong"] for r in res["passes"]):
        sys.exit(1)


if __name__ == "__main__":
    main()
