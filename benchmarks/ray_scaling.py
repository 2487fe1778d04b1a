"""Ray mode's throughput: the in-process loop against 1, 2 and 4 Ray rollout workers.

The embedded SmolLM2-135M-Instruct trains on the code domain (tasks/code, single answers whose
code runs in the sandbox: solution and hidden-test sessions per episode), with the same recipe
on every side; each side runs in its own subprocess, one after the other:

* ``local``: everything in one process (``distributed.backend: local``);
* ``ray1``, ``ray2``, ``ray4``: rollout workers as Ray actors (the trainer too), ``threads`` torch
  threads each, on a local Ray instance.

Per side: episodes per second of the loop over the timed steps (the first steps are a warm-up:
model loading, the first prefill, the sandbox pools), and seconds per episode. The overhead Ray
adds per episode is measured twice: ``ray1`` against ``local`` on the same work (the loop's
seconds per episode), and directly, as the round-trip of a one-token request to a rollout
worker against the same request to an in-process engine (``--probe``).

    python benchmarks/ray_scaling.py                       # all sides, 6 timed steps each
    python benchmarks/ray_scaling.py --steps 2 --warmup 1 --sides local,ray1   # smoke test
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from common import (
    finish,
    fmt,
    log,
    machine_info,
    machine_line,
    md_table,
    new_result,
    parse_sides,
    run_side,
    write_result,
)

SIDES = {"local": 0, "ray1": 1, "ray2": 2, "ray4": 4}
REPO = Path(__file__).resolve().parents[1]


def side_overrides(side: str, args: argparse.Namespace, out_dir: Path) -> list[str]:
    workers = SIDES[side]
    base = [f"run.dir={out_dir / f'ray_scaling_{side}_run'}", f"run.steps={args.warmup + args.steps}",
            "run.checkpoint_every=100000", "eval.before=false", "eval.after=false",
            f"rollout.prompts_per_step={args.prompts}", f"rollout.group_size={args.group}",
            f"rollout.max_new_tokens={args.tokens}", "model.engine_dtype=float32", "trainer.autocast_dtype=none",
            f"run.threads={args.threads}"]
    if workers:
        base += ["distributed.backend=ray", f"distributed.rollout_workers={workers}",
                 f"distributed.rollout.threads={max(1, args.threads // workers) if args.split_threads else args.threads}",
                 f"distributed.trainer.threads={args.threads}", "distributed.rollout.num_cpus=1",
                 "distributed.trainer.num_cpus=1"]
    return base


def config_text() -> str:
    return f"""run: {{name: ray_scaling, seed: 0}}
model: {{name: smollm2-135m-instruct}}
domains:
  - name: code
    env: code
    source: {{kind: tasks, path: {REPO / 'tasks/code'}, eval_fraction: 0.25}}
rollout: {{temperature: 1.0}}
algorithm: {{advantage: grpo}}
trainer: {{lr: 2.0e-5}}
"""


async def probe(engine: Any, n: int) -> list[float]:
    """Round-trip seconds of n one-token greedy requests, one at a time."""
    from practicum.engines.base import SamplingParams
    from practicum.records import Message

    ids = engine.renderer.chat_ids([Message(role="user", content="Say hi.")])
    params = SamplingParams(max_new_tokens=1, temperature=0.0)
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        await engine.generate([ids], params)
        out.append(time.perf_counter() - t0)
    return out


async def side_main(args: argparse.Namespace) -> dict[str, Any]:
    import torch

    from practicum.config import load_config
    from practicum.loop import Run

    out_dir = Path(args.out).resolve().parent
    cfg_path = out_dir / "ray_scaling.yaml"
    cfg_path.parent.mkdir(parents=True, exist_ok=True)
    cfg_path.write_text(config_text())
    cfg = load_config(cfg_path, side_overrides(args._worker, args, out_dir))
    torch.set_num_threads(args.threads)
    t0 = time.perf_counter()
    run = Run(cfg, overwrite=True, log=log)
    startup = time.perf_counter() - t0
    steps: list[dict[str, Any]] = []
    try:
        await run.start()
        latency = await probe(run.engine, args.probe)
        for step in range(1, args.warmup + args.steps + 1):
            t0 = time.perf_counter()
            m = await run.train_step(step)
            dt = time.perf_counter() - t0
            episodes = int(m.get("samples") or args.prompts * args.group)  # the step's trained episodes
            steps.append({"step": step, "seconds": dt, "episodes": episodes, "warmup": step <= args.warmup,
                          "wait_seconds": m.get("wait_seconds"), "update_seconds": m.get("train_seconds"),
                          "retried": m.get("retried_episodes", 0)})
            log(run.summary(step, m))
    finally:
        await run.aclose()
    timed = [s for s in steps if not s["warmup"]]
    secs = sum(s["seconds"] for s in timed)
    eps = sum(s["episodes"] for s in timed)
    return {"startup_seconds": startup, "steps": steps, "episodes": eps, "seconds": secs,
            "episodes_per_s": eps / secs if secs else None, "seconds_per_episode": secs / eps if eps else None,
            "probe_seconds": latency, "probe_median_ms": 1000 * statistics.median(latency) if latency else None}


def report(result: dict[str, Any]) -> str:
    sides = [s for s in SIDES if "episodes_per_s" in result["sides"].get(s, {})]
    local = result["sides"].get("local", {})
    rows = []
    for s in sides:
        r = result["sides"][s]
        ratio = (r["episodes_per_s"] / local["episodes_per_s"]) if local.get("episodes_per_s") else None
        over = ((r["seconds_per_episode"] - local["seconds_per_episode"]) * 1000
                if local.get("seconds_per_episode") and s != "local" else None)
        probe_over = (r["probe_median_ms"] - local["probe_median_ms"]) if local.get("probe_median_ms") and s != "local" else None
        rows.append([s, str(SIDES[s] or "-"), str(r["episodes"]), fmt(r["seconds"], 1), fmt(r["episodes_per_s"], 2),
                     fmt(ratio, 2), fmt(over, 0), fmt(r["probe_median_ms"], 1), fmt(probe_over, 1),
                     fmt(r["startup_seconds"], 1)])
    a = result["settings"]
    return "\n".join([
        f"### ray_scaling: the loop's throughput on the code domain ({a['prompts']} prompts x {a['group']} samples, "
        f"{a['tokens']} new tokens, {a['steps']} timed steps after {a['warmup']} warm-up)",
        "",
        md_table(["side", "rollout workers", "episodes", "seconds", "episodes/s", "vs local", "ms/episode over local",
                  "1-token request ms (median)", "request overhead ms", "start-up s"], rows),
        "",
        f"Machine: {machine_line(result['machine'])}.",
        f"Command: `{result['command']}`",
    ])


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sides", default=",".join(SIDES))
    p.add_argument("--steps", type=int, default=6, help="timed steps per side")
    p.add_argument("--warmup", type=int, default=2, help="untimed steps first")
    p.add_argument("--prompts", type=int, default=8)
    p.add_argument("--group", type=int, default=4)
    p.add_argument("--tokens", type=int, default=96)
    p.add_argument("--threads", type=int, default=2, help="torch threads of the driver, the trainer, and each worker")
    p.add_argument("--split-threads", action="store_true", help="divide --threads among the rollout workers")
    p.add_argument("--probe", type=int, default=20, help="one-token requests timed before training")
    p.add_argument("--out", default="benchmarks/out/ray_scaling.json")
    p.add_argument("--_worker", choices=list(SIDES), help=argparse.SUPPRESS)
    p.add_argument("--_result", help=argparse.SUPPRESS)
    return p.parse_args(argv)


def main() -> None:
    args = parse_args()
    if args._worker:
        res = asyncio.run(side_main(args))
        res["machine"] = machine_info()
        write_result(args._result, res)
        return
    out = Path(args.out)
    sides = parse_sides(args.sides, list(SIDES))
    result = new_result("ray_scaling", {k: getattr(args, k) for k in ("steps", "warmup", "prompts", "group", "tokens",
                                                                    "threads", "split_threads", "probe")})
    argv = [str(Path(__file__).resolve()), *sys.argv[1:]]
    for s in sides:
        result["sides"][s] = run_side(s, argv, out.parent / f"ray_scaling_{s}.part.json")
        write_result(out, result)
    finish(out, result, report(result))


if __name__ == "__main__":
    main()
