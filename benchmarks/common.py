"""Shared helpers of the benchmark scripts: machine description, memory, subprocess sides,
the reward (Practicum's MathEnv, for both frameworks), held-out evaluation and tables.

Every benchmark side runs in its own subprocess, one after the other, so that sides never
share cores or memory; the parent collects each side's JSON result and its peak RSS (from
``os.wait4``, which reports the child's own ``ru_maxrss``).
"""

from __future__ import annotations

import asyncio
import json
import os
import platform
import resource
import shlex
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch

from practicum.engines.base import EngineWrapper

BENCH_DIR = Path(__file__).resolve().parent
REPO = BENCH_DIR.parent


# --- machine ----------------------------------------------------------------------------------
def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def matmul_gflops(n: int = 1024, repeats: int = 8) -> float:
    """The machine's speed now: fp32 GFLOPS of an n x n matmul on torch's threads (about 0.1-0.2 s
    on 2 cores). A shared host's speed moves by tens of percent within minutes (the multidomain
    benchmark's AMD EPYC: 95 to 196 GFLOPS in one minute), and a side's wall-clock budget buys
    fewer steps on a slow hour, so a side records its probes beside its steps. It measures the
    arithmetic only, not every slowdown (memory, page faults)."""
    a, b = torch.randn(n, n), torch.randn(n, n)
    a @ b  # warm
    t0 = time.perf_counter()
    for _ in range(repeats):
        a @ b
    return 2 * n**3 * repeats / (time.perf_counter() - t0) / 1e9


def machine_info() -> dict[str, Any]:
    def version(mod: str) -> str | None:
        try:
            from importlib.metadata import version as v

            return v(mod)
        except Exception:
            return None

    try:
        affinity = len(os.sched_getaffinity(0))
    except AttributeError:
        affinity = os.cpu_count()
    mem_gib = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                mem_gib = round(int(line.split()[1]) / 2**20, 1)
    except OSError:
        pass
    return {
        "cpu": cpu_model(),
        "logical_cpus": os.cpu_count(),
        "cpus_available": affinity,
        "memory_gib": mem_gib,
        "torch_threads": torch.get_num_threads(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "transformers": version("transformers"),
        "trl": version("trl"),
        "practicum": version("practicum"),
        "niceness": os.nice(0),
    }


def command_line() -> str:
    return " ".join(shlex.quote(a) for a in [Path(sys.executable).name, *sys.argv])


# --- memory -------------------------------------------------------------------------------------
def peak_rss_mb() -> float:
    """This process's peak resident set size so far (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def current_rss_mb() -> float:
    try:
        import psutil

        return psutil.Process().memory_info().rss / 2**20
    except ImportError:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


class RssSampler:
    """Samples this process's RSS every ``interval`` s in a thread, keeping the peak per phase
    (e.g. 'train' and 'eval'), so that the training peak is not hidden by evaluation."""

    def __init__(self, interval: float = 0.1) -> None:
        self.interval = interval
        self.phase = "setup"
        self.peaks: dict[str, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        while not self._stop.is_set():
            rss = current_rss_mb()
            self.peaks[self.phase] = max(self.peaks.get(self.phase, 0.0), rss)
            self._stop.wait(self.interval)

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


# --- sides as subprocesses ----------------------------------------------------------------------
def run_side(name: str, argv: Sequence[str], result_file: Path, cpus: set[int] | None = None) -> dict[str, Any]:
    """Run one side (``python script ... --_worker NAME --_result FILE``) with inherited
    stdout/stderr, wait for it with ``os.wait4`` and return its JSON result, plus its wall time
    and peak RSS as the kernel measured them. ``cpus`` pins the side to those cores."""
    result_file.parent.mkdir(parents=True, exist_ok=True)
    result_file.unlink(missing_ok=True)
    cmd = [sys.executable, *argv, "--_worker", name, "--_result", str(result_file)]
    print(f"\n=== {name}: {' '.join(shlex.quote(c) for c in cmd)}", flush=True)
    t0 = time.perf_counter()
    pin = (lambda: os.sched_setaffinity(0, cpus)) if cpus else None
    proc = subprocess.Popen(cmd, cwd=REPO, preexec_fn=pin)
    try:
        _, status, usage = os.wait4(proc.pid, 0)
    except KeyboardInterrupt:
        proc.terminate()
        proc.wait()
        raise
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - t0
    out: dict[str, Any] = {"side": name, "returncode": proc.returncode, "wall_seconds": wall,
                           "cpus": sorted(cpus) if cpus else None,
                           "process_peak_rss_mb": usage.ru_maxrss / 1024}
    if proc.returncode != 0 or not result_file.is_file():
        out["error"] = f"{name} exited with status {proc.returncode}" + (
            "" if result_file.is_file() else " and wrote no result")
        print(f"!!! {out['error']}", flush=True)
        return out
    out.update(json.loads(result_file.read_text()))
    return out


def parse_sides(spec: str, known: Sequence[str]) -> list[str]:
    """The comma-separated sides of ``--sides``, in order; an unknown one stops the script."""
    sides = [x.strip() for x in spec.split(",") if x.strip()]
    unknown = [x for x in sides if x not in known]
    if unknown:
        raise SystemExit(f"unknown side(s) {unknown}; choose from {list(known)}")
    return sides


def new_result(benchmark: str, settings: dict[str, Any]) -> dict[str, Any]:
    """The result a benchmark fills side by side: what ran, where, with which settings."""
    return {"benchmark": benchmark, "command": command_line(), "machine": machine_info(), "settings": settings,
            "started": time.strftime("%Y-%m-%d %H:%M:%S"), "sides": {}}


def write_result(path: str | Path, data: dict[str, Any]) -> None:
    Path(path).write_text(json.dumps(data, indent=1, default=str))


def finish(out: Path, result: dict[str, Any], markdown: str) -> None:
    """Write a benchmark's final result with its table, print the table, and exit non-zero when
    a side failed."""
    result["markdown"] = markdown
    write_result(out, result)
    print("\n" + markdown)
    print(f"\nwrote {out}")
    if any("error" in r for r in result["sides"].values()):
        sys.exit(1)


def log(msg: str) -> None:
    print(msg, flush=True)


def practicum_run(config: str | Path, overrides: list[str], threads: int | None):
    """Practicum's side of a benchmark: a fresh :class:`practicum.loop.Run` from the config."""
    import torch

    from practicum.loop import Run

    cfg = load_cfg(config, overrides)
    if threads:
        torch.set_num_threads(threads)
    return Run(cfg, overwrite=True, log=log)


# --- domain, reward, evaluation -----------------------------------------------------------------
def load_cfg(path: str | Path, overrides: list[str] | None = None):
    from practicum.config import load_config

    return load_config(path, overrides or [])


def build_single_domain(cfg):
    from practicum.domains import build_domain

    if len(cfg.domains) != 1:
        raise SystemExit(f"the benchmark config must name exactly one domain, got {len(cfg.domains)}")
    return build_domain(cfg.domains[0], cfg.run.seed, cfg.base_dir)


def score_texts(domain, tasks: list, texts: list[str]) -> list[Any]:
    """Score each reply exactly as a Practicum rollout does: a fresh MathEnv per episode,
    ``reset(task)`` then ``step(reply)``. Returns the :class:`Score` of each."""

    async def one(task, text):
        env = domain.make_env()
        await env.reset(task)
        obs = await env.step(text)
        await env.close()
        return obs.score

    async def all_():
        return [await one(t, x) for t, x in zip(tasks, texts)]

    return asyncio.run(all_())


def completion_text(completion: Any) -> str:
    """TRL passes conversational completions as ``[{"role": "assistant", "content": ...}]``."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, list):
        return "".join(m.get("content") or "" for m in completion if m.get("role", "assistant") == "assistant")
    if isinstance(completion, dict):
        return completion.get("content") or ""
    raise TypeError(f"unexpected completion type {type(completion)!r}")


def messages_as_dicts(task) -> list[dict[str, str]]:
    return [{"role": m.role, "content": m.content} for m in task.prompt]


def make_engine(cfg, model_path):
    from practicum.engines.hf import HFEngine
    from practicum.hardware import resolve_dtype

    dtype = resolve_dtype(cfg.model.engine_dtype, cfg.model.device)
    return HFEngine(model_path, dtype=dtype, device=cfg.model.device, **cfg.model.hf_options())


class BatchAtATime(EngineWrapper):
    """HFEngine seen through its batch-at-a-time path only (no ``submit``), so that
    BatchingEngine batches between calls as it does for engines that cannot join a batch."""

    def __init__(self, engine: Any) -> None:
        self.engine = engine



    async def generate(self, prompts: list[list[int]], params: Any) -> list[Any]:
        return await self.engine.generate_batch(prompts, params)

    def load_weights(self, state: Any, version: int) -> None:
        self.engine.load_weights(state, version)

    async def close(self) -> None:
        return None  # a view: the engine it shows is closed by its owner


async def aevaluate_engine(engine, domain, max_new_tokens: int, limit: int | None,
                           kind_of: Callable[[Any], str] | None = None) -> dict[str, Any]:
    """Practicum's held-out evaluation (greedy, :func:`practicum.evaluation.evaluate`), flattened to
    {reward, strict, lenient, format, n, seconds}; with ``kind_of`` (task -> a kind of problem)
    also ``by_kind``: {kind: {n, lenient}}."""
    from practicum.evaluation import evaluate

    res = await evaluate(engine, [domain], max_new_tokens, 1, None, 0, limit)
    m: dict[str, Any] = dict(res.per_domain[domain.name])
    m["seconds"] = res.seconds
    if kind_of is not None:
        kinds = {t.id: kind_of(t) for t in domain.source.eval_tasks()}
        by: dict[str, list[float]] = {}
        for r in res.per_task:
            by.setdefault(kinds[r.task], []).append(r.components.get("lenient", 0.0))
        m["by_kind"] = {k: {"n": len(v), "lenient": sum(v) / len(v)} for k, v in sorted(by.items())}
    return m


def evaluate_engine(engine, domain, max_new_tokens: int, limit: int | None,
                    kind_of: Callable[[Any], str] | None = None) -> dict[str, Any]:
    return asyncio.run(aevaluate_engine(engine, domain, max_new_tokens, limit, kind_of))


class EvalSchedule:
    """Evaluation points in training minutes: 0, every, 2*every, ..., limit. ``due(t)`` says
    whether a point has been reached by training time ``t`` (seconds) since the last evaluation;
    each evaluation is labelled with the point it stands for and the training time it ran at."""

    def __init__(self, minutes: float, every: float) -> None:
        self.limit_s = minutes * 60
        pts: list[float] = []
        k = 1
        while every > 0 and k * every < minutes - 1e-9:
            pts.append(k * every)
            k += 1
        pts.append(minutes)
        self.points = pts  # after time 0
        self.i = 0

    def due(self, train_seconds: float) -> float | None:
        """The latest point reached and not yet evaluated, or None."""
        hit = None
        while self.i < len(self.points) and train_seconds >= self.points[self.i] * 60 - 1e-9:
            hit = self.points[self.i]
            self.i += 1
        return hit

    def done(self, train_seconds: float) -> bool:
        return train_seconds >= self.limit_s


def eval_line(label: str, m: dict[str, Any]) -> str:
    kinds = "".join(f" {k} {v['lenient']:.2f}" for k, v in m.get("by_kind", {}).items())
    return (f"[eval] {label}: strict {m.get('strict', 0):.3f} lenient {m.get('lenient', 0):.3f} "
            f"format {m.get('format', 0):.3f} (n={int(m['n'])}, {m['seconds']:.0f} s)"
            + (f" | by kind:{kinds}" if kinds else ""))


# --- reporting ----------------------------------------------------------------------------------
def median(xs: Sequence[float]) -> float | None:
    xs = sorted(x for x in xs if x is not None)
    if not xs:
        return None
    n = len(xs)
    return xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2


def mean(xs: Sequence[float]) -> float | None:
    xs = [x for x in xs if x is not None]
    return sum(xs) / len(xs) if xs else None


def fmt(x: Any, digits: int = 3) -> str:
    if x is None:
        return "–"
    if isinstance(x, float):
        return f"{x:.{digits}f}"
    return str(x)


def md_table(header: list[str], rows: list[list[Any]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(" --- " for _ in header) + "|"]
    for r in rows:
        lines.append("| " + " | ".join(fmt(c) if not isinstance(c, str) else c for c in r) + " |")
    return "\n".join(lines)


def machine_line(m: dict[str, Any]) -> str:
    return (f"{m['cpu']}, {m['cpus_available']} cores available ({m['logical_cpus']} logical), "
            f"{m.get('memory_gib')} GiB, torch {m['torch']} with {m['torch_threads']} threads, "
            f"transformers {m['transformers']}, trl {m['trl']}")


def timed_grpo_trainer_class():
    """TRL's GRPOTrainer, recording the seconds of each generation call in ``gen_seconds``
    (``_generate``: prompt rendering, ``model.generate``, decoding)."""
    from trl import GRPOTrainer

    class TimedGRPOTrainer(GRPOTrainer):
        def _generate(self, prompts):
            t0 = time.perf_counter()
            out = super()._generate(prompts)
            self.__dict__.setdefault("gen_seconds", []).append(time.perf_counter() - t0)
            return out

    return TimedGRPOTrainer
