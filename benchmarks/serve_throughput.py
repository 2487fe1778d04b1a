"""`practicum serve` against `transformers serve` and one-request-at-a-time generation.

Same model (the embedded SmolLM2-135M-Instruct, converted checkpoint), same prompts, same
settings (greedy, ``--tokens`` new tokens), one side after the other, each server in its own
process on 127.0.0.1, driven by the official ``openai`` client (AsyncOpenAI) with 1, 4 and 16
concurrent clients; each client sends requests back to back until ``--requests`` have been
answered at that concurrency. Sides:

* ``practicum``: ``practicum serve`` (continuous batching in HFEngine);
* ``practicum-int8``: the same server's fast tier (``--tier int8``, dynamic int8 weights);
* ``transformers``: ``transformers serve --continuous-batching`` (its continuous-batching
  OpenAI-compatible server);
* ``plain``: no server - one ``model.generate`` call at a time in this process (concurrency 1
  only: the floor any server must beat).

Per side and concurrency: requests/s, completion tokens/s, median and p90 latency. Target
(issue 14): ahead of ``transformers serve`` at 16 clients.

    python benchmarks/serve_throughput.py                          # every side, 48 requests per level
    python benchmarks/serve_throughput.py --requests 8 --levels 1,4 --sides practicum,plain   # smoke test
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from common import command_line, finish, fmt, log, machine_info, machine_line, md_table, write_result

REPO = Path(__file__).resolve().parents[1]
SIDES = ("practicum", "practicum-int8", "transformers", "plain")
QUESTIONS = [f"Explain in one sentence what {w} is." for w in (
    "a compiler", "photosynthesis", "a prime number", "gravity", "an index in a database", "inflation", "a protein",
    "the stock market", "a neural network", "a volcano", "DNA", "a contract", "a hash function", "the moon",
    "a tax return", "an operating system")]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_server(side: str, model: Path, port: int, threads: int) -> subprocess.Popen:
    env = {**os.environ, "OMP_NUM_THREADS": str(threads)}
    if side.startswith("practicum"):
        cmd = [str(REPO / ".venv/bin/practicum"), "serve", "--model", str(model), "--name", "m", "--port", str(port),
               "--dtype", "float32", "--max-tokens", "4096"] + (["--tier", "int8"] if side == "practicum-int8" else [])
    else:
        cmd = [str(REPO / ".venv/bin/transformers"), "serve", "--continuous-batching", "--device", "cpu",
               "--dtype", "float32", "--host", "127.0.0.1", "--port", str(port), str(model)]
    return subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)


def wait_ready(port: int, proc: subprocess.Popen, timeout: float = 300) -> None:
    import httpx

    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the server exited: {proc.stderr.read().decode()[-2000:] if proc.stderr else ''}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise RuntimeError("the server did not start in time")


async def load(base: str, model_name: str, concurrency: int, requests: int, tokens: int) -> dict[str, Any]:
    import openai

    client = openai.AsyncOpenAI(base_url=base, api_key="none", max_retries=0, timeout=600)
    latencies: list[float] = []
    completion_tokens = 0
    next_i = 0

    async def worker() -> None:
        nonlocal next_i, completion_tokens
        while next_i < requests:
            i = next_i
            next_i += 1
            t0 = time.perf_counter()
            r = await client.chat.completions.create(model=model_name, temperature=0, max_tokens=tokens,
                                                     messages=[{"role": "user", "content": QUESTIONS[i % len(QUESTIONS)]}])
            latencies.append(time.perf_counter() - t0)
            completion_tokens += r.usage.completion_tokens if r.usage else 0

    t0 = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    wall = time.perf_counter() - t0
    await client.close()
    return {"requests": len(latencies), "seconds": wall, "requests_per_s": len(latencies) / wall,
            "tokens_per_s": completion_tokens / wall, "completion_tokens": completion_tokens,
            "latency_median_s": statistics.median(latencies),
            "latency_p90_s": sorted(latencies)[int(0.9 * (len(latencies) - 1))]}


def plain(model: Path, requests: int, tokens: int, threads: int) -> dict[str, Any]:
    import torch
    from transformers import AutoTokenizer

    from practicum.models import load_causal_lm

    torch.set_num_threads(threads)
    tok = AutoTokenizer.from_pretrained(model)
    m = load_causal_lm(model, torch.float32, "cpu").eval()
    latencies, n_tok = [], 0
    t0 = time.perf_counter()
    for i in range(requests):
        t1 = time.perf_counter()
        ids = tok.apply_chat_template([{"role": "user", "content": QUESTIONS[i % len(QUESTIONS)]}],
                                      add_generation_prompt=True, return_tensors="pt", return_dict=True)
        with torch.no_grad():
            out = m.generate(**ids, max_new_tokens=tokens, do_sample=False)
        n_tok += out.shape[1] - ids["input_ids"].shape[1]
        latencies.append(time.perf_counter() - t1)
    wall = time.perf_counter() - t0
    return {"requests": requests, "seconds": wall, "requests_per_s": requests / wall, "tokens_per_s": n_tok / wall,
            "completion_tokens": n_tok, "latency_median_s": statistics.median(latencies),
            "latency_p90_s": sorted(latencies)[int(0.9 * (requests - 1))]}


def run_side(side: str, args: argparse.Namespace, model: Path) -> dict[str, Any]:
    levels = [int(x) for x in args.levels.split(",")]
    if side == "plain":
        log("plain: one generate() at a time")
        return {"1": plain(model, args.requests, args.tokens, args.threads)}
    port = free_port()
    proc = start_server(side, model, port, args.threads)
    out: dict[str, Any] = {}
    try:
        wait_ready(port, proc)
        name = "m-int8" if side == "practicum-int8" else ("m" if side.startswith("practicum") else str(model))
        asyncio.run(load(f"http://127.0.0.1:{port}/v1", name, 1, 2, args.tokens))  # warm-up
        for c in levels:
            log(f"{side}: {c} concurrent clients")
            out[str(c)] = asyncio.run(load(f"http://127.0.0.1:{port}/v1", name, c, args.requests, args.tokens))
            log(f"  {out[str(c)]['requests_per_s']:.2f} req/s, {out[str(c)]['tokens_per_s']:.1f} tok/s")
        if side == "practicum-int8" and args.capability:  # both tiers are served here: the full one as "m"
            log(f"capability: {args.capability} arithmetic tasks through m and m-int8, then practicum compare")
            out["compare"] = asyncio.run(capability(port, ["m", "m-int8"], args.capability, args.tokens,
                                                    Path(args.out).parent))
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=60)
    return out


async def capability(port: int, names: list[str], n_tasks: int, tokens: int, out_dir: Path) -> dict[str, Any]:
    """Greedy evaluation of each served name on the same fixed tasks (the quickstart's arithmetic
    held-out set) through the OpenAI engine, written as `practicum eval --json` files, then
    `practicum compare` on them: the fast tier's capability change and the gate's verdict."""
    import json

    from practicum.config import load_config
    from practicum.domains import build_domain
    from practicum.engines.openai_api import EndpointConfig, OpenAIEngine
    from practicum.evaluation import evaluate

    cfg = load_config(REPO / "examples/quickstart.yaml")
    domains = [build_domain(d, cfg.run.seed, cfg.base_dir) for d in cfg.domains]
    files = {}
    for name in names:
        engine = OpenAIEngine(EndpointConfig(base_url=f"http://127.0.0.1:{port}/v1", model=name, api_key_env=None,
                                             timeout=600, max_concurrency=16))
        res = await evaluate(engine, domains, tokens, 1, limit=n_tasks)
        await engine.close()
        path = out_dir / f"serve_capability_{name}.json"
        path.write_text(json.dumps({"model": name, "seconds": res.seconds, "per_domain": res.per_domain,
                                    "per_task": [r.model_dump() for r in res.per_task]}))
        files[name] = path
    a, b = (str(files[n]) for n in names)
    proc = subprocess.run([str(REPO / ".venv/bin/practicum"), "compare", a, b, "--tolerance", "0.02", "--json"],
                          capture_output=True, text=True)
    out = json.loads(proc.stdout.strip().splitlines()[-1]) if proc.stdout.strip() else {"error": proc.stderr[-500:]}
    out["exit_code"] = proc.returncode
    return out


def report(result: dict[str, Any]) -> str:
    levels = result["settings"]["levels"]
    rows = []
    for side, per in result["sides"].items():
        if "error" in per:
            rows.append([side, "error: " + per["error"][:80]] + [""] * 4)
            continue
        for c, m in per.items():
            if c == "compare":
                continue
            rows.append([side, c, fmt(m["requests_per_s"], 2), fmt(m["tokens_per_s"], 1), fmt(m["latency_median_s"], 2),
                         fmt(m["latency_p90_s"], 2)])
    ratio = []
    t = result["sides"].get("transformers", {})
    for side in ("practicum", "practicum-int8"):
        p = result["sides"].get(side, {})
        for c in levels:
            if str(c) in p and str(c) in t:
                ratio.append(f"{side} / transformers at {c}: {p[str(c)]['tokens_per_s'] / t[str(c)]['tokens_per_s']:.2f}x tokens/s")
    cmp = result["sides"].get("practicum-int8", {}).get("compare")
    gate = ""
    if cmp and "domains" in cmp:
        gate = "Fast tier (int8) vs full, decided by `practicum compare` (tolerance 0.02): " + "; ".join(
            f"{d}: {m['mean_a']:.3f} -> {m['mean_b']:.3f}, diff {m['diff']:+.3f} [{m['lo']:+.3f}, {m['hi']:+.3f}], "
            f"detectable at 80% power {m['mde_80']:.3f}" for d, m in cmp["domains"].items()) + \
            f"; evaluation speed-up {cmp.get('speedup') or 0:.2f}x; gate **{'pass' if cmp.get('pass') else 'FAIL'}** (exit {cmp['exit_code']})."
    return "\n".join([
        f"### serve_throughput ({result['settings']['requests']} requests per level, greedy, {result['settings']['tokens']} new tokens)",
        "", md_table(["side", "clients", "requests/s", "tokens/s", "median latency s", "p90 latency s"], rows), "",
        "; ".join(ratio) + ".", gate, f"Machine: {machine_line(result['machine'])}.", f"Command: `{result['command']}`"])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sides", default=",".join(SIDES))
    p.add_argument("--levels", default="1,4,16")
    p.add_argument("--requests", type=int, default=48)
    p.add_argument("--tokens", type=int, default=64)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--capability", type=int, default=100, help="arithmetic tasks for the fast-vs-full comparison (0: skip)")
    p.add_argument("--out", default="benchmarks/out/serve_throughput.json")
    args = p.parse_args()
    from practicum.models import resolve_model

    model = resolve_model("smollm2-135m-instruct")
    result: dict[str, Any] = {"benchmark": "serve_throughput", "command": command_line(), "machine": machine_info(),
                              "settings": {"levels": [int(x) for x in args.levels.split(",")], "requests": args.requests,
                                           "tokens": args.tokens, "threads": args.threads}, "sides": {}}
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    for side in [s.strip() for s in args.sides.split(",") if s.strip()]:
        if side not in SIDES:
            raise SystemExit(f"unknown side {side!r}; choose from {SIDES}")
        try:
            result["sides"][side] = run_side(side, args, model)
        except Exception as e:  # noqa: BLE001 - a side that fails is reported, the others still run
            result["sides"][side] = {"error": f"{type(e).__name__}: {e}"}
        write_result(out, result)
    finish(out, result, report(result))


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).parent))
    main()
