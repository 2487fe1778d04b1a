"""Asynchronous overlap: the same training run at max_staleness 0, 1 and 2, side by side.

A multi-turn domain whose environment time is comparable to generation time: terminal tasks
(benchmarks/async_overlap.yaml: bash, read_file, write_file and submit in a sandboxed workspace,
hidden tests at the end; the embedded model, full fine-tune). Every side trains the same number
of steps on the same task stream with the same seeds, so the same number of trained samples.

Sides (each in its own subprocess, one after the other, with both cores):

- ``batch-s0``: max_staleness 0 and the engine's batch-at-a-time path (a request that arrives
  while a batch decodes waits for the whole batch: the lockstep of the old loop);
- ``sync``: max_staleness 0 with continuous batching (each episode's turn joins the running
  decode batch): the effect of continuous batching alone is ``batch-s0`` vs ``sync``;
- ``async1``, ``async2``: max_staleness 1 and 2 (rollouts of the next steps run while the trainer
  updates; samples at most 1 or 2 policy versions old, importance-corrected as configured).

Reported per side: wall-clock of the training steps (start-up and model loading excluded, the
same for all), trained samples per second, the reward curve (mean reward of the trained groups
per step), the policy-version lag of trained samples, and how episode time splits between
generation and environment; and the speed-up of each side over ``sync``.

    python benchmarks/async_overlap.py                       # 4 sides x 8 steps (about 30 min on 2 cores)
    python benchmarks/async_overlap.py --steps 2 --sides sync,async1
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
    BENCH_DIR,
    BatchAtATime,
    command_line,
    fmt,
    load_cfg,
    log,
    machine_info,
    machine_line,
    md_table,
    run_side,
    write_result,
)

SIDES = {  # name: (max_staleness, continuous batching)
    "batch-s0": (0, False),
    "sync": (0, True),
    "async1": (1, True),
    "async2": (2, True),
}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", default=str(BENCH_DIR / "async_overlap.yaml"))
    p.add_argument("--steps", type=int, default=None, help="training steps per side (default: the config's)")
    p.add_argument("--sides", default=",".join(SIDES), help=f"comma-separated, from {', '.join(SIDES)}")
    p.add_argument("--threads", type=int, default=2, help="torch threads per side")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a config field for every side (repeatable)")
    p.add_argument("--out", default=str(BENCH_DIR / "out" / "async_overlap.json"))
    p.add_argument("--_worker", choices=list(SIDES), help=argparse.SUPPRESS)
    p.add_argument("--_result", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    args.side_list = [s.strip() for s in args.sides.split(",") if s.strip()]
    unknown = [s for s in args.side_list if s not in SIDES]
    if unknown:
        p.error(f"unknown side(s) {unknown}; choose from {list(SIDES)}")
    return args


# --- one side ----------------------------------------------------------------------------------
async def _train(args: argparse.Namespace, side: str) -> dict[str, Any]:
    import torch

    from practicum.engines.hf import HFEngine
    from practicum.hardware import resolve_dtype
    from practicum.loop import Run
    from practicum.models import resolve_model

    staleness, continuous = SIDES[side]
    overrides = [*args.overrides, f"async.max_staleness={staleness}",
                 f"run.dir={Path(args.out).parent / 'async_overlap' / side}"]
    if args.steps:
        overrides.append(f"run.steps={args.steps}")
    cfg = load_cfg(args.config, overrides)
    torch.set_num_threads(args.threads)
    hf = HFEngine(resolve_model(cfg.model.name), dtype=resolve_dtype(cfg.model.engine_dtype, cfg.model.device),
                  device=cfg.model.device, **cfg.model.hf_options())
    engine = hf if continuous else BatchAtATime(hf)
    run = Run(cfg, overwrite=True, log=log, engine=engine)
    steps: list[dict[str, Any]] = []
    try:
        t0 = time.perf_counter()
        await run.start()
        for step in range(1, cfg.run.steps + 1):
            m = await run.train_step(step)
            log(run.summary(step, m))
            steps.append({"step": step, "seconds": time.perf_counter() - t0, "reward": m.get(f"{cfg.domains[0].name}/reward"),
                          "lag_mean": m["lag_mean"], "wait_seconds": m["wait_seconds"],
                          "update_seconds": m["step_seconds"] - m["wait_seconds"], "samples": m.get("samples"),
                          "gen_tokens": m["gen_tokens"], "dropped": m["dropped_groups"], "failed": m["failed_groups"],
                          "retried": m["retried_episodes"], "mismatch": m.get("mismatch_abs_logp")})
        wall = time.perf_counter() - t0
        await run.orch.finish()
        episodes = [e for g in run.store.groups(kind="train") if g.state.value == "trained" for e in g.episodes]
    finally:
        await run.orch.close()
        for dom in run.domains:
            await dom.close()
        await run.aclose()
    gen = sum(t.gen_seconds for e in episodes for t in e.turns)
    total = sum(e.seconds for e in episodes)
    rewards = [e.reward for e in episodes]
    return {
        "max_staleness": staleness, "continuous": continuous, "steps": steps, "wall_seconds": wall,
        "trained_episodes": len(episodes), "samples_per_s": len(episodes) / wall,
        "mean_reward": statistics.fmean(rewards) if rewards else None,
        "turns_per_episode": statistics.fmean(len(e.turns) for e in episodes) if episodes else None,
        "episode_seconds_mean": total / max(len(episodes), 1),
        "episode_gen_share": gen / total if total else None,  # rest: tools, sandbox, tests, queueing
        "lag_mean": statistics.fmean(s["lag_mean"] for s in steps),
        "update_seconds_mean": statistics.fmean(s["update_seconds"] for s in steps),
        "wait_seconds_mean": statistics.fmean(s["wait_seconds"] for s in steps),
    }


def worker(args: argparse.Namespace) -> None:
    write_result(args._result, asyncio.run(_train(args, args._worker)))


# --- the driver --------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if args._worker:
        worker(args)
        return
    forwarded = [a for a in (argv if argv is not None else sys.argv[1:])]
    results: dict[str, dict[str, Any]] = {}
    for side in args.side_list:
        results[side] = run_side(side, [__file__, *forwarded], Path(args.out).with_suffix(f".{side}.json"))
    ok = {s: r for s, r in results.items() if "error" not in r}
    base = ok.get("sync")
    rows = []
    for s, r in ok.items():
        speed = base["wall_seconds"] / r["wall_seconds"] if base else None
        rows.append([s, r["max_staleness"], "yes" if r["continuous"] else "no", r["trained_episodes"],
                     r["wall_seconds"], r["samples_per_s"], speed, r["mean_reward"], r["lag_mean"],
                     r["episode_gen_share"], r["update_seconds_mean"], r["wait_seconds_mean"]])
    table = md_table(["side", "max_staleness", "continuous", "trained episodes", "wall s", "samples/s",
                      "speed-up vs sync", "mean reward", "lag", "gen share of episode time",
                      "update s/step", "wait s/step"], rows)
    curve_steps = max((len(r["steps"]) for r in ok.values()), default=0)
    curves = md_table(["step", *ok], [[i + 1, *(fmt(r["steps"][i]["reward"]) if i < len(r["steps"]) else "" for r in ok.values())]
                                      for i in range(curve_steps)])
    machine = machine_info()
    write_result(args.out, {"command": command_line(), "machine": machine, "sides": results})
    print(f"\nmachine: {machine_line(machine)}\n\n{table}\n\nreward of the trained groups per step:\n\n{curves}")
    failed = [s for s in results if s not in ok]
    if failed:
        print(f"\nfailed sides: {failed}")
        sys.exit(1)


if __name__ == "__main__":
    main()
