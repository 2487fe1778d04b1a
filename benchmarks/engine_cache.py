"""Engine cache: the engine's own KV-cache layers and family-by-family prefill against
transformers' ``DynamicLayer`` and one padded prefill, on the multidomain benchmark's prompts.

One GRPO step's generation, as the loop asks for it: 8 prompts x 8 samples, at most 48 new
tokens, temperature 1.0, of the embedded SmolLM2-135M-Instruct (fp32, as
benchmarks/multidomain.yaml ran it to its v10). Batches: ``mixed`` (two tasks of each of the four domains:
arithmetic with four worked examples, products with none, decimals with two, equations with one
- prompts of 60 to 260 tokens that share only the system prompt) and one batch per domain alone.

- ``practicum``: the engine as it ships - its cache layers append into spare room
  (``kv_room``, :func:`practicum.engines.hf._roomy_layer`), and prompts that begin alike in
  families prefill family by family (``cluster_prefill``);
- ``transformers``: the same engine with transformers' own ``DynamicLayer`` (``torch.cat`` of the
  whole layer at every token) and one left-padded prefill of every distinct prompt
  (``kv_room = 0``, ``cluster_prefill = False``): what it did before.

Two ways of asking: ``together`` (one ``generate`` call of the 64 requests: admitted at once)
and ``one by one`` (64 concurrent ``submit`` calls, each sample its own request, as the training
loop's episodes ask: the engine admits whatever has arrived when it looks, so the batch forms
over a few admissions - merges into the running batch - while rows end at their own lengths).

Same seeds on both sides, so both sample the same tokens (up to rounding); the sides alternate on
one engine in one process, each batch of tasks once per side per repeat. Reported: medians of
the whole generation's wall time and of the prefill alone (one new token, ``together`` only),
and the ratios.

    python benchmarks/engine_cache.py                 # 3 repeats, a few minutes
    python benchmarks/engine_cache.py --repeats 1
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from pathlib import Path

import torch
from common import BENCH_DIR, command_line, load_cfg, log, machine_info, machine_line, md_table

from practicum.engines.base import SamplingParams
from practicum.engines.hf import HFEngine
from practicum.models import resolve_model

SIDES = {"practicum": (True, None), "transformers": (False, 0)}  # cluster_prefill, kv_room (None: the default)


def batches(cfg_path: str, repeat: int) -> dict[str, list[list]]:
    from practicum.domains import build_domain

    cfg = load_cfg(cfg_path)
    domains = {d.name: build_domain(d, cfg.run.seed, cfg.base_dir) for d in cfg.domains}
    first = 1000 * repeat  # other tasks each repeat, the same on both sides
    out = {"mixed": [domains[n].source.train_task(first + i).prompt for n in domains for i in range(2)]}
    for n, dom in domains.items():
        out[n] = [dom.source.train_task(first + i).prompt for i in range(8)]
    return out


async def main(args: argparse.Namespace) -> None:
    torch.set_num_threads(args.threads)
    engine = HFEngine(resolve_model("smollm2-135m-instruct"), dtype=torch.float32, max_batch=64)
    default_room = engine.kv_room
    await engine.generate([engine.renderer.chat_ids(batches(args.config, 0)["mixed"][0])], SamplingParams(max_new_tokens=2))
    times: dict[tuple[str, str, str], list[float]] = {}
    tokens: dict[tuple[str, str], list[int]] = {}
    for rep in range(args.repeats):
        for name, prompts in batches(args.config, rep).items():
            ids = [engine.renderer.chat_ids(p) for p in prompts for _ in range(8)]
            for side, (cluster, room) in SIDES.items():
                engine.cluster_prefill, engine.kv_room = cluster, default_room if room is None else room
                for what, n in (("prefill", 1), ("generation", args.max_new_tokens), ("one by one", args.max_new_tokens)):
                    engine._drop_prefixes()  # as after a weight update: nothing computed is reused
                    params = SamplingParams(max_new_tokens=n, temperature=1.0, seed=rep)
                    t0 = time.perf_counter()
                    if what == "one by one":
                        out = await asyncio.gather(*(engine.submit(x, params) for x in ids))
                    else:
                        out = await engine.generate(ids, params)
                    dt = time.perf_counter() - t0
                    times.setdefault((name, side, what), []).append(dt)
                    if what != "prefill":
                        tokens.setdefault((name, side, what), []).append(sum(len(c.ids) for c in out))
                log(f"repeat {rep} {name:>10} {side:>12}: prefill {times[(name, side, 'prefill')][-1]:.2f} s, "
                    f"generation {times[(name, side, 'generation')][-1]:.2f} s, one by one "
                    f"{times[(name, side, 'one by one')][-1]:.2f} s, {tokens[(name, side, 'generation')][-1]} / "
                    f"{tokens[(name, side, 'one by one')][-1]} tokens")
    await engine.close()
    med = {k: statistics.median(v) for k, v in times.items()}
    rows = []
    for name in batches(args.config, 0):
        pp, pt = (med[(name, s, "prefill")] for s in SIDES)
        gp, gt = (med[(name, s, "generation")] for s in SIDES)
        op, ot = (med[(name, s, "one by one")] for s in SIDES)
        toks = statistics.median(tokens[(name, "practicum", "generation")])
        rows.append([name, f"{pt:.2f}", f"{pp:.2f}", f"**{pp / pt:.2f}×**", f"{gt:.2f}", f"{gp:.2f}",
                     f"**{gp / gt:.2f}×**", f"{ot:.2f}", f"{op:.2f}", f"**{op / ot:.2f}×**", f"{toks:.0f}"])
    result_md = "\n".join([
        f"### engine_cache: {args.repeats} repeats, medians (s)", "",
        md_table(["batch (8 prompts × 8)", "prefill, transformers", "prefill, practicum", "ratio",
                  "together, transformers", "together, practicum", "ratio",
                  "one by one, transformers", "one by one, practicum", "ratio", "tokens"], rows), "",
        f"Machine: {machine_line(machine_info())}.", f"Command: `{command_line()}`"])
    print("\n" + result_md)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(result_md + "\n")
    log(f"wrote {out}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", default=str(BENCH_DIR / "multidomain.yaml"))
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--max-new-tokens", type=int, default=48)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", default=str(BENCH_DIR / "out" / "engine_cache.md"))
    asyncio.run(main(ap.parse_args()))
