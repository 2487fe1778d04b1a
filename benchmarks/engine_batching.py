"""Engine batching: the batch-at-a-time path against continuous batching, on staggered
multi-turn episodes.

The workload is what the orchestrator sends an engine: one coroutine per episode, each asking
``await engine.generate([context], params)`` for its next turn, then spending "environment
time" (a seeded sleep, as a sandbox or tool call would) before appending an observation and
asking again. Groups of episodes share their first prompt and seed (GRPO); groups arrive at
staggered times. Both sides go through :class:`~practicum.engines.batching.BatchingEngine`,
as the orchestrator does:

- ``batch``: the engine's batch-at-a-time path (``HFEngine.generate_batch``): every request
  waiting when the engine is free goes into one ``generate`` call, and a request that arrives
  meanwhile waits for the whole batch to end;
- ``continuous``: ``HFEngine.submit``: a request joins the running decode batch at the next
  step and returns as soon as it ends; the prefix cache off (every turn prefills its whole
  conversation);
- ``continuous+prefix``: the same with the prefix cache on (Practicum's default): a turn that
  continues an ended row's conversation prefills only its new tokens.

Same model (the embedded SmolLM2-135M-Instruct, the engine dtype of the config: auto), same
prompts (the chain_sum stream of benchmarks/learn_arithmetic.yaml), same environment times,
same seeds. Sides alternate in one process on one engine (batch, continuous, batch, ...), and
the report gives medians over the repeats and the ratios continuous / batch and
continuous+prefix / continuous. Sampled replies
differ between the paths (different sampling algorithms), so the report gives tokens per second
and the mean completion length besides wall times.

    python benchmarks/engine_batching.py                  # 2 repeats per side, a few minutes
    python benchmarks/engine_batching.py --repeats 1 --groups 2
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import time
from pathlib import Path
from typing import Any

import torch
from common import (
    BENCH_DIR,
    BatchAtATime,
    build_single_domain,
    command_line,
    load_cfg,
    machine_info,
    machine_line,
    md_table,
)

from practicum.engines.base import SamplingParams
from practicum.engines.batching import BatchingEngine
from practicum.models import resolve_model
from practicum.records import Message

FOLLOW_UP = Message(role="user", content="Check your answer and state it again in <answer></answer> tags.")


async def episode(engine: BatchingEngine, messages: list[Message], params: SamplingParams, turns: int,
                  env_seconds: list[float], start: float, t0: float, latencies: list[float]) -> dict[str, float]:
    await asyncio.sleep(max(0.0, t0 + start - time.perf_counter()))
    began = time.perf_counter()
    ids = engine.renderer.chat_ids(messages)
    tokens = 0
    for turn in range(turns):
        asked = time.perf_counter()
        [c] = await engine.generate([ids], SamplingParams(**{**params.__dict__, "seed": params.seed + 7919 * turn,
                                                             "keep_prefix": turn + 1 < turns}))
        latencies.append(time.perf_counter() - asked)
        tokens += len(c.ids)
        if turn + 1 == turns:
            break
        await asyncio.sleep(env_seconds[turn])  # the environment: a tool call, a test run
        reply = Message(role="assistant", content=c.text)
        ids = ids + c.ids + engine.renderer.append_ids([*messages, reply], [FOLLOW_UP], ids + c.ids)
        messages = [*messages, reply, FOLLOW_UP]
    return {"tokens": tokens, "seconds": time.perf_counter() - began}


async def run_side(engine: BatchingEngine, work: list[dict[str, Any]], turns: int) -> dict[str, Any]:
    latencies: list[float] = []
    t0 = time.perf_counter()
    done = await asyncio.gather(*(episode(engine, w["messages"], w["params"], turns, w["env"], w["start"], t0, latencies)
                                  for w in work))
    wall = time.perf_counter() - t0
    tokens = sum(d["tokens"] for d in done)
    return {"wall_seconds": wall, "tokens": tokens, "tok_per_s": tokens / wall, "requests": len(latencies),
            "mean_request_seconds": statistics.fmean(latencies),
            "p90_request_seconds": sorted(latencies)[int(0.9 * (len(latencies) - 1))],
            "mean_episode_seconds": statistics.fmean(d["seconds"] for d in done),
            "mean_completion_tokens": tokens / len(latencies)}


def workload(domain: Any, args: argparse.Namespace) -> list[dict[str, Any]]:
    rng = random.Random(args.seed)
    work = []
    for g in range(args.groups):
        task = domain.source.train_task(g)
        arrival = g * args.stagger + rng.uniform(0, args.stagger)
        params = SamplingParams(max_new_tokens=args.max_new_tokens, temperature=1.0, seed=1000 + g)
        for _ in range(args.group_size):
            work.append({"messages": list(task.prompt), "params": params, "start": arrival,
                         "env": [rng.uniform(args.env_min, args.env_max) for _ in range(args.turns)]})
    return work


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", default=str(BENCH_DIR / "learn_arithmetic.yaml"))
    ap.add_argument("--groups", type=int, default=4)
    ap.add_argument("--group-size", type=int, default=4)
    ap.add_argument("--turns", type=int, default=3)
    ap.add_argument("--max-new-tokens", type=int, default=48)
    ap.add_argument("--stagger", type=float, default=1.0, help="seconds between group arrivals (plus jitter)")
    ap.add_argument("--env-min", type=float, default=0.2, help="environment seconds per turn, drawn uniformly")
    ap.add_argument("--env-max", type=float, default=2.0)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--dtype", choices=["auto", "bfloat16", "float32"], help="engine dtype (default: the config's)")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="config override")
    ap.add_argument("--out", default=str(BENCH_DIR / "out" / "engine_batching.json"))
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)

    from practicum.engines.hf import HFEngine

    cfg = load_cfg(args.config, args.set)
    domain = build_single_domain(cfg)
    from practicum.hardware import resolve_dtype

    dtype = resolve_dtype(args.dtype or cfg.model.engine_dtype, cfg.model.device)
    hf = HFEngine(resolve_model(cfg.model.name), dtype=dtype, max_batch=cfg.model.max_batch)
    work = workload(domain, args)
    budget = int(cfg.model.prefix_cache_mb * 2**20)

    def side(continuous: bool, prefix: bool):
        def make():
            hf._drop_prefixes()  # every side starts with an empty prefix cache
            hf.prefix_cache_bytes = budget if prefix else 0
            return BatchingEngine(hf if continuous else BatchAtATime(hf))
        return make

    sides = {"batch": side(False, False), "continuous": side(True, False), "continuous+prefix": side(True, True)}
    asyncio.run(hf.generate([hf.renderer.chat_ids(work[0]["messages"])], SamplingParams(max_new_tokens=4)))  # warm-up
    runs: dict[str, list[dict[str, Any]]] = {s: [] for s in sides}
    for rep in range(args.repeats):
        for name, make in sides.items():
            r = asyncio.run(run_side(make(), work, args.turns))
            runs[name].append(r)
            print(f"repeat {rep + 1} {name}: " + ", ".join(f"{k} {v:.3f}" if isinstance(v, float) else f"{k} {v}"
                                                           for k, v in r.items()), flush=True)
    keys = ["wall_seconds", "tok_per_s", "mean_request_seconds", "p90_request_seconds", "mean_episode_seconds",
            "mean_completion_tokens"]
    med = {s: {k: statistics.median(r[k] for r in rs) for k in keys} for s, rs in runs.items()}
    ratio = {k: med["continuous"][k] / med["batch"][k] for k in keys}
    ratio_prefix = {k: med["continuous+prefix"][k] / med["continuous"][k] for k in keys}
    machine = machine_info()
    result = {"command": command_line(), "machine": machine, "args": vars(args), "runs": runs, "median": med,
              "ratio_continuous_over_batch": ratio, "ratio_prefix_over_continuous": ratio_prefix}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=1))
    print()
    print(f"machine: {machine_line(machine)}")
    print(md_table(["side", *keys], [[s, *(med[s][k] for k in keys)] for s in sides]
                   + [["continuous / batch", *(ratio[k] for k in keys)],
                      ["continuous+prefix / continuous", *(ratio_prefix[k] for k in keys)]]))
    print(f"\nwritten to {args.out}")


if __name__ == "__main__":
    main()
