"""Training across domains: one run on four domains at once, against one run per domain alone.

The embedded SmolLM2-135M-Instruct (full fine-tune, fp32 on CPU) trains for the same training
wall-clock budget in each side, one side after the other, each in its own subprocess:

* ``mixed``: all domains of benchmarks/multidomain.yaml with its ``curriculum:`` section (v8:
  1:1:1:1 mixing kept in the trained stream, products' fading scaffold, format rewards, the drift
  guard with its reaction, checked on a held-out evaluation every ``--drift-every`` training
  minutes; the filter and replay are in the section, off - ``--set`` turns them on);
* ``ablation``: the same domains and hyperparameters, without the ``curriculum:`` section;
* ``single:DOMAIN``: that domain alone, the same recipe with only that domain's help from the
  curriculum: its scaffold, its difficulty levels and its shaping (if any);
* ``base``: the untrained model (no training; evaluated once).

Every side is then evaluated on every domain's held-out set (greedy, the same tasks, the first
``--eval-size`` of each domain), so a single-domain run also shows what it did to the domains it
did not train (forgetting). Per (side, domain): the mean held-out score with a 95% t-interval,
and the paired difference from the base model on the same tasks (mean, 95% paired-t interval,
two-sided p, verdict gain / loss / no change at alpha 0.05). The target of issue 12: the mixed
run gains significantly on every trained domain and loses on none (an intersection-union test:
each domain must pass at alpha on its own, so no multiplicity correction is needed), and its
mean over domains is at least the single runs' mean (each single run on its own domain; the
report also gives each single run's mean over every domain, the other reading of "on average").

Evaluation time is not training time: before each evaluation the orchestrator is paused and
drained (the drain on the training clock), as in learn_arithmetic.py.

    python benchmarks/multidomain.py --minutes 5                     # all sides
    python benchmarks/multidomain.py --minutes 0.5 --eval-size 10    # smoke test
    python benchmarks/multidomain.py --sides base,mixed              # some sides
    python benchmarks/multidomain.py --sides mixed --set curriculum.replay.enabled=true \
        --reuse benchmarks/out/multidomain.json --out benchmarks/out/replay.json   # one side again, judged against the rest
    python benchmarks/multidomain.py --set run.seed=1 --reuse benchmarks/out/multidomain.json \
        --sides mixed,single:arithmetic,... --out benchmarks/out/seed1.json                # the trained sides with another seed
    python benchmarks/multidomain.py --pool benchmarks/out/multidomain.json benchmarks/out/seed1.json  # judged over seeds

A training seed moves a side's mean by more than the gap the target judges, so ``--pool`` trains
nothing and judges the target over several results' seeds: each seed that ran the mixed side and
every single side is analysed alone, then every side's per-task scores are averaged over those
seeds and the averages decide (``benchmarks/out/multidomain_seeds.json``).

Output: benchmarks/out/multidomain.json (every side's per-task held-out scores, steps, drift
guard decisions, statistics) and markdown tables on stdout.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import json
import math
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import yaml
from common import (
    EvalSchedule,
    RssSampler,
    command_line,
    finish,
    fmt,
    log,
    machine_info,
    machine_line,
    matmul_gflops,
    md_table,
    peak_rss_mb,
    run_side,
    write_result,
)

ALPHA = 0.05
LEVEL = 0.95


# --- statistics (pure; tests/test_bench_multidomain.py checks them by hand) -----------------------
def t_sf(t: float, df: float) -> float:
    """P(T >= t) for Student's t with ``df`` degrees of freedom (the drift guard's own tail)."""
    from practicum.curriculum.drift import student_t_sf

    return student_t_sf(t, df)


def t_quantile(p: float, df: float) -> float:
    """The q with P(T <= q) = p, for p in (0.5, 1) (practicum.eval_metrics)."""
    from practicum.eval_metrics import t_quantile as quantile

    return quantile(p, df)


@dataclass
class Interval:
    """A mean with its two-sided t-interval (``lo``/``hi`` None with fewer than two values)."""

    n: int
    mean: float | None
    lo: float | None = None
    hi: float | None = None


@dataclass
class Diff:
    """A paired comparison: mean difference, its standard error and t-interval, the two-sided p,
    the verdict, and on how many tasks the first side scored higher / lower."""

    n: int
    mean: float | None
    se: float | None = None
    lo: float | None = None
    hi: float | None = None
    df: float | None = None
    p: float | None = None
    verdict: str = "too few tasks"
    wins: int = 0
    losses: int = 0


def mean_ci(xs: list[float], level: float = LEVEL, bounds: tuple[float, float] | None = None) -> Interval:
    """Mean of ``xs`` with a two-sided t-interval, cut to ``bounds`` (the range a score can take)."""
    n = len(xs)
    if n == 0:
        return Interval(0, None)
    m = sum(xs) / n
    if n < 2:
        return Interval(n, m)
    sd = math.sqrt(sum((x - m) ** 2 for x in xs) / (n - 1))
    h = t_quantile(0.5 + level / 2, n - 1) * sd / math.sqrt(n)
    lo, hi = m - h, m + h
    if bounds is not None:
        lo, hi = max(lo, bounds[0]), min(hi, bounds[1])
    return Interval(n, m, lo, hi)


def verdict(mean: float, p: float, alpha: float = ALPHA) -> str:
    """gain / loss when the two-sided p is below alpha (the interval excludes 0), else no change."""
    if p < alpha:
        return "gain" if mean > 0 else "loss"
    return "no change"


def _t_test(m: float, se: float, df: float, level: float) -> tuple[float, float, float]:
    """(lo, hi, two-sided p) of a mean ``m`` with standard error ``se``; se 0 means every paired
    difference was the same (usually 0: nothing changed)."""
    if se == 0.0:
        return m, m, (1.0 if m == 0 else 0.0)
    h = t_quantile(0.5 + level / 2, df) * se
    return m - h, m + h, min(1.0, 2.0 * t_sf(abs(m) / se, df))


def paired_diff(a: dict[str, float], b: dict[str, float], level: float = LEVEL) -> Diff:
    """Paired t comparison of scores ``a`` against ``b`` (task id -> score) on the tasks both
    hold: the differences a - b (gain: a is higher)."""
    ids = sorted(set(a) & set(b))
    diffs = [a[i] - b[i] for i in ids]
    n = len(diffs)
    if n < 2:
        return Diff(n, diffs[0] if diffs else None)
    m = sum(diffs) / n
    se = math.sqrt(sum((d - m) ** 2 for d in diffs) / (n - 1) / n)
    lo, hi, p = _t_test(m, se, n - 1, level)
    return Diff(n, m, se, lo, hi, n - 1, p, verdict(m, p, 1 - level),
                sum(d > 0 for d in diffs), sum(d < 0 for d in diffs))


def mean_of_diffs(parts: list[Diff], level: float = LEVEL) -> Diff:
    """The mean over domains of per-domain paired differences (each from :func:`paired_diff` on
    its own tasks): the mean of the means, standard error sqrt(sum se_d^2) / D (the domains'
    task sets are independent), Welch-Satterthwaite degrees of freedom."""
    parts = [p for p in parts if p.mean is not None and p.se is not None]
    if not parts:
        return Diff(0, None)
    d = len(parts)
    m = sum(p.mean for p in parts) / d  # type: ignore[misc]
    var = sum(p.se**2 for p in parts) / d**2  # type: ignore[operator]
    tails = sum(p.se**4 / (p.n - 1) for p in parts)  # type: ignore[operator]
    df = (d**2 * var) ** 2 / tails if tails > 0 else float(sum(p.n - 1 for p in parts))
    lo, hi, p = _t_test(m, math.sqrt(var), df, level)
    return Diff(sum(x.n for x in parts), m, math.sqrt(var), lo, hi, df, p, verdict(m, p, 1 - level),
                sum(x.wins for x in parts), sum(x.losses for x in parts))


# --- side configs ---------------------------------------------------------------------------------
def side_names(domains: list[str]) -> list[str]:
    return ["base", "mixed", "ablation", *(f"single:{d}" for d in domains)]


def side_raw(raw: dict[str, Any], side: str) -> dict[str, Any]:
    """The config of one side, from the benchmark's config: ``mixed`` as written; ``ablation``
    without the curriculum section; ``single:D`` with domain D alone and, of the curriculum,
    only D's own help - its scaffold, its difficulty levels and its reward shaping (a domain's
    help belongs to the domain: without it a single run on a task whose format the model never
    writes could not learn it at all, one on a task too hard to start on would learn little, and
    one trained on another reward than the mixed run's share of that domain would not be the
    same task, which would flatter the mixed run)."""
    out = copy.deepcopy(raw)
    if side in ("mixed", "base"):
        return out
    cur = out.pop("curriculum", None) or {}
    if side == "ablation":
        return out
    if side.startswith("single:"):
        name = side.split(":", 1)[1]
        out["domains"] = [d for d in raw["domains"] if d["name"] == name]
        if not out["domains"]:
            raise SystemExit(f"side {side}: the config has no domain {name!r}")
        own = {part: {name: cur[part][name]} for part in ("scaffold", "levels", "shaping") if name in (cur.get(part) or {})}
        if own:
            out["curriculum"] = own
        return out
    raise SystemExit(f"unknown side {side!r}")


def read_raw(path: str | Path, overrides: list[str]) -> dict[str, Any]:
    from practicum.config import _set_dotted, parse_overrides

    raw = yaml.safe_load(Path(path).read_text()) or {}
    for k, v in parse_overrides(overrides, str(path)):
        _set_dotted(raw, k, v, str(path))
    return raw


def side_file(out: Path, side: str, suffix: str) -> Path:
    """A side's file or folder beside the result ``out``, named after it: each --out its own run
    folders and partial results, so a later run with another --out keeps an earlier run's."""
    return out.parent / f"{out.stem}_{side.replace(':', '_')}{suffix}"


def side_config(args: argparse.Namespace, side: str):
    from practicum.config import validate_config

    raw = side_raw(read_raw(args.config, args.overrides), side)
    raw.setdefault("run", {})["dir"] = str(side_file(Path(args.out).resolve(), side, "_run"))
    raw["run"]["name"] = f"multidomain_{side.replace(':', '_')}"
    raw["run"]["time_limit_minutes"] = args.minutes  # the learning-rate schedule's clock (the script stops the side)
    if args.single_checks and side.startswith("single:"):
        # held-out checks on a specialist, to count what it forgets as the mix's are counted: the
        # guard only warns (a log line), so training is the specialist's own
        raw.setdefault("curriculum", {})["drift"] = {"enabled": True, "reaction": "warn"}
    raw.setdefault("eval", {}).update({"before": False, "after": False, "max_new_tokens": args.eval_tokens})
    if args.threads:
        raw["run"]["threads"] = args.threads
    resolve_precision(raw)
    return validate_config(raw, f"{args.config} ({side})", base_dir=Path(args.config).parent)


def resolve_precision(raw: dict[str, Any]) -> None:
    """``auto`` precision (the engine's dtype, the trainer's autocast) replaced in ``raw`` by what it
    resolves to on this machine: bf16 where the device computes it, fp32 elsewhere. A side's stored
    recipe then says which it ran, and a side that ran the other is another recipe to ``--reuse``."""
    from practicum.hardware import resolve_autocast, resolve_dtype

    model, trainer = raw.setdefault("model", {}), raw.setdefault("trainer", {})
    device = model.get("device", "cpu")
    if model.get("engine_dtype", "auto") == "auto":
        model["engine_dtype"] = str(resolve_dtype("auto", device)).removeprefix("torch.")
    if trainer.get("autocast_dtype", "auto") == "auto":
        dtype = resolve_autocast("auto", device)
        trainer["autocast_dtype"] = "none" if dtype is None else str(dtype).removeprefix("torch.")


def all_domains(args: argparse.Namespace):
    """Every domain of the benchmark config (the same held-out tasks for every side: the held-out
    split is a function of the domain's section, its ``eval_seed`` among it)."""
    from practicum.domains import build_domain

    cfg = side_config(args, "ablation")
    return cfg, [build_domain(d, cfg.run.seed, cfg.base_dir) for d in cfg.domains]


async def final_eval(args: argparse.Namespace, engine, domains, max_turns: int) -> dict[str, Any]:
    """Greedy held-out evaluation of ``engine`` on every domain: per-task scores and means, and
    the reply given to the most tasks (a policy collapsed onto one answer shows there)."""
    from practicum.eval_metrics import same_reply
    from practicum.evaluation import evaluate

    res = await evaluate(engine, domains, args.eval_tokens, max_turns, None, 0, args.eval_size)
    out: dict[str, Any] = {}
    for d in domains:
        rows = [r for r in res.per_task if r.domain == d.name]
        tally = res.tallies.get(d.name)
        top, share = same_reply(res.episodes.get(d.name, []))
        out[d.name] = {
            "means": res.per_domain.get(d.name, {}),
            "scores": {r.task: r.reward for r in rows},
            "components": {r.task: r.components for r in rows},
            "errors": tally.errors if tally else None,
            "seconds": tally.seconds if tally else None,
            "same_reply": {"share": share, "text": top},
        }
    out["_seconds"] = res.seconds
    return out


# --- a side -------------------------------------------------------------------------------------
async def base_main(args: argparse.Namespace, sampler: RssSampler) -> dict[str, Any]:
    from common import make_engine

    from practicum.models import resolve_model

    cfg, domains = all_domains(args)
    engine = make_engine(cfg, resolve_model(cfg.model.name))
    sampler.phase = "eval"
    try:
        ev = await final_eval(args, engine, domains, cfg.rollout.max_turns)
    finally:
        await engine.close()
    log("[eval] base: " + eval_summary(ev))
    return {"trained_domains": [], "steps": [], "final": ev, "drift": [], "config": cfg.model_dump(mode="json")}


def eval_summary(ev: dict[str, Any]) -> str:
    return "; ".join(f"{d} {v['means'].get('reward', 0):.3f} (n={len(v['scores'])})"
                     for d, v in ev.items() if not d.startswith("_")) + f" [{ev['_seconds']:.0f} s]"


async def train_main(args: argparse.Namespace, sampler: RssSampler) -> dict[str, Any]:
    import torch

    from practicum.loop import Run

    side = args._worker
    cfg = side_config(args, side)
    if cfg.run.threads:
        torch.set_num_threads(cfg.run.threads)
    guard = (side == "mixed" or args.single_checks) and cfg.curriculum.drift.enabled
    lines: list[str] = []

    def log_and_keep(msg: str) -> None:
        if "drift" in msg:
            lines.append(msg)
        log(msg)

    run = Run(cfg, overwrite=True, log=log_and_keep)
    _, domains = all_domains(args)
    sched = EvalSchedule(args.minutes, args.drift_every if guard else 0.0)
    steps: list[dict[str, Any]] = []
    drift_evals: list[dict[str, Any]] = []
    notes: list[dict[str, Any]] = []
    speed: list[dict[str, Any]] = []  # the machine's speed at the side's start, checks and end (outside its clock)

    def probe(step: int) -> None:
        speed.append({"step": step, "gflops": round(matmul_gflops(), 1)})

    async def guard_eval(step: int, train_s: float) -> None:
        sampler.phase = "eval"
        res = await run.evaluate(step, args.drift_eval_size)  # the drift guard records and reacts
        sampler.phase = "train"
        moved = {d.domain: d for d in run.guard_decisions}  # what moved under each mean, as the guard counted it
        forgotten = {d: moved[d].forgotten if d in moved else None for d in res.per_domain}
        drift_evals.append({"step": step, "train_minutes": train_s / 60, "seconds": res.seconds,
                            "per_domain": {d: m.get("reward") for d, m in res.per_domain.items()},
                            "forgotten": forgotten,
                            "lost_gained": {d: (moved[d].lost, moved[d].gained) for d in res.per_domain if d in moved},
                            "best_step": {d: moved[d].best_step for d in res.per_domain if d in moved}})
        log(f"[drift eval] {side} step {step} t={train_s / 60:.2f} min: "
            + " ".join(f"{d} {m.get('reward', 0):.3f}" + (f" (forgot {forgotten[d]:.0f})" if forgotten[d] else "")
                       for d, m in res.per_domain.items()) + f" ({res.seconds:.0f} s)")

    events: list[dict[str, Any]] = []
    fates: dict[str, int] = {}
    try:
        async with run.orch.paused():
            await run.start()
            probe(0)
            if guard:
                await guard_eval(0, 0.0)  # the guard's first reference point: the base model
        train_s = 0.0
        step = 0
        sampler.phase = "train"
        while True:
            step += 1
            t0 = time.perf_counter()
            run.train_seconds = train_s  # the script's clock is the run's (the schedule reads it)
            m = await run.train_step(step)
            dt = time.perf_counter() - t0
            train_s += dt
            rec = {"step": step, "step_seconds": dt, "train_seconds": train_s,
                   "skipped": bool(m.get("skipped")), "uniform_groups": m.get("uniform_groups"),
                   "completion_len": m.get("completion_len")}
            for k, v in m.items():
                if isinstance(v, (int, float)) and ("/" in k or k in ("filtered_groups", "replayed_groups", "retained_groups", "loss", "lr",
                                                                           "grad_conflicts", "grad_cosine_min")):
                    rec[k] = v
            steps.append(rec)
            if m.get("notes"):
                notes.append({"step": step, "notes": list(m["notes"])})
            log(run.summary(step, m) + f" | train {train_s / 60:.2f} min")
            point = sched.due(train_s)
            stop = sched.done(train_s) or (args.max_steps is not None and step >= args.max_steps)
            if (point is not None and guard) or stop:
                async with run.orch.paused():
                    t0 = time.perf_counter()
                    await run.orch.drain()
                    train_s += time.perf_counter() - t0
                    probe(step)
                    if guard and not stop:
                        await guard_eval(step, train_s)
                    if stop:
                        if guard:  # the guard sees the end too (a rollback here changes what is evaluated)
                            await guard_eval(step, train_s)
                        sampler.phase = "eval"
                        final = await final_eval(args, run.engine, domains, cfg.rollout.max_turns)
                        log(f"[eval] {side} after {step} steps ({train_s / 60:.2f} min): " + eval_summary(final))
            if stop:
                break
        # the curriculum's decisions as the store records them (drift reactions, scaffold, levels)
        events = [{"step": e[6], "domain": e[2], "kind": e[4], "line": e[5]}
                  for e in run.store.events() if e[1] == "curriculum"]
        fates = group_fates(run.store)
    finally:
        await run.aclose()
    return {
        "trained_domains": [d.name for d in cfg.domains],
        "config": cfg.model_dump(mode="json"),
        "steps": steps,
        "train_seconds": train_s,
        "final": final,
        "drift": {"evals": drift_evals, "lines": lines, "notes": notes, "events": events},
        "replayed_groups": sum(r.get("replayed_groups", 0) for r in steps),
        "filtered_groups": sum(r.get("filtered_groups", 0) for r in steps),
        "group_fates": fates,
        "speed": speed,
    }


def group_fates(store: Any) -> dict[str, int]:
    """What became of every group the side drew, from its store: trained, or the head of the
    reason it was left out (``filtered``, ``stale``, the run's end), or still in flight."""
    out: Counter = Counter()
    for _gid, _draw, state, _step, reason, _attempts in store.draws():  # one row a group, no episodes read
        out[state if state != "dropped" else reason.split(":")[0]] += 1
    return dict(out)


def worker(args: argparse.Namespace) -> None:
    with RssSampler() as sampler:
        t0 = time.perf_counter()
        main_ = base_main if args._worker == "base" else train_main
        res = asyncio.run(main_(args, sampler))
        res["worker_seconds"] = time.perf_counter() - t0
    res["peak_rss_mb_by_phase"] = dict(sampler.peaks)
    res["peak_rss_mb_self"] = peak_rss_mb()
    write_result(args._result, res)


# --- statistics over sides, and the report -------------------------------------------------------
def analyse(result: dict[str, Any], domains: list[str]) -> dict[str, Any]:
    """Statistics over the sides that finished: per (side, domain) the mean with its interval and
    the paired difference from the base model; then the target's verdicts for the mixed side."""
    ok = {s: r for s, r in result["sides"].items() if "final" in r}

    def scores(side: str, domain: str) -> dict[str, float]:
        return ok[side]["final"][domain]["scores"]

    table: dict[str, dict[str, Any]] = {}
    for s in ok:
        table[s] = {}
        for d in domains:
            cell: dict[str, Any] = {"score": asdict(mean_ci(list(scores(s, d).values()), bounds=(0.0, 1.0)))}
            if "base" in ok and s != "base":
                cell["vs_base"] = asdict(paired_diff(scores(s, d), scores("base", d)))
            table[s][d] = cell
    out: dict[str, Any] = {"table": table, "alpha": ALPHA, "level": LEVEL,
                           "test": "two-sided paired t on per-task held-out scores (the same tasks); "
                                   "score intervals: t-intervals cut to [0, 1]"}
    if "mixed" not in ok or "base" not in ok:
        return out
    verdicts = {d: table["mixed"][d]["vs_base"]["verdict"] for d in domains}
    collapsed = collapsed_domains(ok, domains)
    singles = [d for d in domains if f"single:{d}" in ok]
    vs_single = {d: paired_diff(scores("mixed", d), scores(f"single:{d}", d)) for d in singles}
    complete = len(singles) == len(domains)
    avg_mixed = mean_over(table["mixed"], domains)
    avg_single = (sum(table[f"single:{d}"][d]["score"]["mean"] for d in domains) / len(domains)
                  if complete else None)
    # the other reading of "as high as the single runs on average": each single run judged, like
    # the mixed one, by its mean over every domain (what it gained at home less what it cost
    # elsewhere); reported beside the own-domain reading, which alone decides `met`
    avg_single_all = (sum(mean_over(table[f"single:{d}"], domains) for d in domains) / len(domains)
                      if complete else None)
    t: dict[str, Any] = {
        "mixed_vs_base": verdicts,
        # a gain made of one reply to most tasks is what that answer happens to fit, not a skill
        "collapsed_gains": {d: collapsed[d] for d, v in verdicts.items() if v == "gain" and d in collapsed},
        "gains_on_every_domain": all(v == "gain" and d not in collapsed for d, v in verdicts.items()),
        "loses_on_none": not any(v == "loss" for v in verdicts.values()),
        "mixed_mean_over_domains": avg_mixed,
        "singles_mean_own_domain": avg_single,
        "singles_mean_over_domains": avg_single_all,
        "mixed_minus_singles": asdict(mean_of_diffs(list(vs_single.values()))) if complete else None,
        "at_least_single_average": None if avg_single is None or avg_mixed is None else avg_mixed >= avg_single,
        "mixed_vs_single_per_domain": {d: asdict(v) for d, v in vs_single.items()},
        "mixed_vs_ablation_per_domain": ({d: asdict(paired_diff(scores("mixed", d), scores("ablation", d)))
                                          for d in domains} if "ablation" in ok else {}),
        # what training one domain alone did to the others
        "single_on_other_domains": {d: {o: table[f"single:{d}"][o]["vs_base"] for o in domains if o != d}
                                    for d in singles},
    }
    # the target compares sides of one wall-clock budget; a result that took sides of another
    # (--reuse-other-budget) reports the comparison and does not judge it
    budgets = {s: r.get("minutes") for s, r in ok.items() if s != "base"}
    if len({m for m in budgets.values() if m is not None}) > 1:
        t["budgets_differ"] = budgets
    # likewise sides taken from a run of another recipe (--reuse-other-recipe)
    recipes = {s: r["recipe_differs"] for s, r in ok.items() if r.get("recipe_differs")}
    if recipes:
        t["recipes_differ"] = recipes
    t["met"] = bool(t["gains_on_every_domain"] and t["loses_on_none"] and t["at_least_single_average"]
                    and "budgets_differ" not in t and "recipes_differ" not in t)
    out["target"] = t
    return out


def collapsed_domains(sides: dict[str, Any], domains: list[str]) -> dict[str, dict[str, Any]]:
    """Domains on which the mixed side gave one reply to at least half the held-out tasks, and to
    more of them than the base model did (the untrained model's own habit - gcd's base answers
    '12', the example's first number, to 59% - is no collapse of training's making); a result
    without replies (written before the benchmark kept them) has none."""
    from practicum.eval_metrics import one_reply_to_most

    out = {}
    for d in domains:
        tasks, top = commonest_reply(sides["mixed"], d)
        base = commonest_reply(sides.get("base", {}), d)[1]
        if one_reply_to_most(tasks, top.get("share")) and top["share"] > (base.get("share") or 0.0):
            out[d] = {"share": top["share"], "text": top.get("text"), "base_share": base.get("share")}
    return out


def commonest_reply(side: dict[str, Any], domain: str) -> tuple[int, dict[str, Any]]:
    """A side's held-out tasks on ``domain`` and its ``same_reply`` record ({} when it has none)."""
    final = (side.get("final") or {}).get(domain) or {}
    return len(final.get("scores") or {}), final.get("same_reply") or {}


def ci_text(c: dict[str, Any], signed: bool = False) -> str:
    if c.get("mean") is None:
        return "–"
    m = f"{c['mean']:+.3f}" if signed else f"{c['mean']:.3f}"
    if c.get("lo") is None:
        return m
    lo, hi = (f"{c['lo']:+.3f}", f"{c['hi']:+.3f}") if signed else (f"{c['lo']:.3f}", f"{c['hi']:.3f}")
    return f"{m} [{lo}, {hi}]"


def diff_text(c: dict[str, Any]) -> str:
    mark = {"gain": " **gain**", "loss": " **loss**"}.get(c.get("verdict", ""), "")
    return ci_text(c, signed=True) + mark


def cell_text(cell: dict[str, Any]) -> str:
    """A (side, domain) cell of the tables: the score with its interval, and its difference from base."""
    return ci_text(cell["score"]) + ("" if "vs_base" not in cell else "<br>Δ " + diff_text(cell["vs_base"]))


def report(result: dict[str, Any], domains: list[str]) -> str:
    a = result.get("analysis", {})
    table = a.get("table", {})
    order = [s for s in side_names(domains) if s in table]
    rows = []
    for s in order:
        r = result["sides"][s]
        steps = len(r.get("steps") or [])
        row: list[Any] = [s, "–" if s == "base" else str(steps)]
        for d in domains:
            cell = table[s][d]
            row.append(cell_text(cell))
        row.append(fmt(mean_over(table[s], domains)))
        rows.append(row)
    n = {d: next((table[s][d]["score"]["n"] for s in order), 0) for d in domains}
    lines = [
        f"### multidomain: held-out score per domain after {result['settings']['minutes']:g} training minutes per side "
        f"(greedy; held-out tasks: {', '.join(f'{d} {k}' for d, k in n.items())}; {result['settings']['eval_tokens']} tokens)",
        "",
        md_table(["side", "steps", *domains, "mean over domains"], rows),
        "",
        "Each cell: mean score [95% t-interval]; Δ: paired difference from the base model on the same tasks "
        "[95% paired-t interval], **gain**/**loss** where the two-sided paired t-test rejects no change at 0.05.",
    ]
    t = a.get("target")
    if t:
        vs = t["mixed_minus_singles"]
        lines += [
            "",
            f"- mixed vs base: {', '.join(f'{d} {v}' for d, v in t['mixed_vs_base'].items())}; "
            f"gains on every domain: **{'yes' if t['gains_on_every_domain'] else 'no'}**"
            + "".join(f" ({d}'s gain is one reply, {(c['text'] or '')[:40]!r}, to {c['share']:.0%} of its tasks: not counted)"
                      for d, c in (t.get("collapsed_gains") or {}).items())
            + f", loses on none: **{'yes' if t['loses_on_none'] else 'no'}**.",
            f"- mean over domains: mixed {fmt(t['mixed_mean_over_domains'])}, single runs on their own domain "
            f"{fmt(t['singles_mean_own_domain'])}"
            + (f"; mixed - single (mean of per-domain paired differences): {diff_text(vs)}" if vs else "")
            + f"; at least as high: **{'yes' if t['at_least_single_average'] else 'no'}**"
            + (f" (each single run's mean over every domain, averaged: {fmt(t['singles_mean_over_domains'])})"
               if t.get("singles_mean_over_domains") is not None else "") + ".",
            "- mixed vs single on its own domain: " + ", ".join(
                f"{d} {diff_text(c)}" for d, c in t["mixed_vs_single_per_domain"].items()) + ".",
        ]
        if t["mixed_vs_ablation_per_domain"]:
            lines.append("- mixed vs ablation (the curriculum's own effect): " + ", ".join(
                f"{d} {diff_text(c)}" for d, c in t["mixed_vs_ablation_per_domain"].items()) + ".")
        if t.get("budgets_differ"):
            lines.append("- sides of different training budgets (minutes: " + ", ".join(
                f"{s} {m:g}" for s, m in t["budgets_differ"].items() if m is not None)
                + "): the target compares one budget and is **not judged** here.")
        for side, diffs in (t.get("recipes_differ") or {}).items():
            lines.append(f"- {side} was trained under another recipe ({'; '.join(diffs)}): the target is **not judged** here.")
        if not t.get("budgets_differ") and not t.get("recipes_differ"):
            lines.append(f"- **target {'met' if t['met'] else 'not met'}**.")
    collapsed = same_reply_lines(result, order, domains)
    if collapsed:
        lines += ["", "One reply to most held-out tasks (a policy collapsed onto one answer; its score is the share of "
                  "tasks that answer fits): " + "; ".join(collapsed) + "."]
    fates = {s: r["group_fates"] for s, r in result["sides"].items() if r.get("group_fates")}
    if fates:
        lines += ["", "Groups drawn per side, by fate (from each side's store): " + "; ".join(
            f"{s} " + ", ".join(f"{n} {k}" for k, n in sorted(f.items(), key=lambda kv: -kv[1]))
            for s, f in fates.items()) + "."]
    mixed = result["sides"].get("mixed", {})
    drift = mixed.get("drift") or {}
    if drift:
        evs = drift.get("evals", [])
        reactions = [f"step {e['step']} {e['kind']} {e['domain']}: {e['line']}" for e in drift.get("events", [])
                     if e["kind"].startswith("drift")]
        lines += ["", f"Mixed run: {int(mixed.get('filtered_groups', 0))} groups filtered out, "
                  f"{int(mixed.get('replayed_groups', 0))} replayed; drift guard: {len(evs)} held-out checks "
                  f"({result['settings']['drift_eval_size']} tasks per domain) at steps "
                  f"{', '.join(str(e['step']) for e in evs) or '–'}; "
                  + (f"reactions: {'; '.join(reactions)}." if reactions else "no domain regressed, no reaction.")]
        last = evs[-1] if evs else {}
        if last.get("forgotten"):  # results written before the guard counted them have none
            lines += ["", f"At its last check (step {last['step']}), held-out tasks each domain had right at an earlier check "
                      "and not now (forgotten; the mean can hold while it forgets): " + ", ".join(
                          f"{d} {n:.0f}" for d, n in last["forgotten"].items() if n is not None) + "."]
        moved = {d: lg for d, lg in (last.get("lost_gained") or {}).items() if (last.get("best_step") or {}).get(d) is not None}
        if moved:  # results written before the best check's step was kept report forgotten tasks alone
            lines += ["", "Against each domain's best earlier check, the tasks it lost and gained (the drift guard's "
                      "paired test): " + ", ".join(f"{d} -{lost:.0f} +{gained:.0f} (best at step {last['best_step'][d]})"
                                                  for d, (lost, gained) in moved.items()) + "."]
    if result.get("reused"):
        lines += ["", f"Sides taken from `{result['reused']['from']}` (an earlier run, paired on the same held-out tasks): "
                  + ", ".join(f"{s} (run started {result['sides'][s].get('reused_from')}"
                              + (f", at `{result['sides'][s]['commit']}`" if result["sides"][s].get("commit") else "") + ")"
                              for s in result["reused"]["sides"]) + "."]
    here = {s: r.get("commit") for s, r in result["sides"].items() if s not in (result.get("reused") or {}).get("sides", [])}
    if any(here.values()):
        lines += ["", "Sides run here at " + ", ".join(sorted({f"`{c}`" for c in here.values() if c})) + "."]
    speeds = {s: [p["gflops"] for p in result["sides"][s].get("speed") or []] for s in order}
    if any(speeds.values()):  # results written before the probe have none
        lines += ["", "Machine speed while each side trained (fp32 1024² matmul, GFLOPS, median of its probes at "
                  "the start, every check and the end; it sees the arithmetic, not every slowdown of a shared host): "
                  + ", ".join(f"{s} {statistics.median(v):.0f}" for s, v in speeds.items() if v) + "."]
    lines += ["", f"Machine: {machine_line(result['machine'])}.", f"Command: `{result['command']}`"]
    return "\n".join(lines)


def same_reply_lines(result: dict[str, Any], sides: list[str], domains: list[str]) -> list[str]:
    """(side, domain) pairs whose held-out replies were one reply to at least half the tasks
    (results written before the benchmark kept replies have none)."""
    from practicum.eval_metrics import one_reply_to_most

    out = []
    for s in sides:
        for d in domains:
            tasks, top = commonest_reply(result["sides"][s], d)
            if one_reply_to_most(tasks, top.get("share")):
                out.append(f"{s} {d} {top['share']:.0%} {top['text'][:40]!r}")  # repr: a reply may hold newlines or backticks
    return out


def mean_over(row: dict[str, Any], domains: list[str]) -> float | None:
    xs = [row[d]["score"]["mean"] for d in domains]
    return None if any(x is None for x in xs) else sum(xs) / len(xs)


# --- several training seeds ------------------------------------------------------------------------
def side_seed(r: dict[str, Any]) -> int | None:
    """The training seed a side ran with (its stored config's ``run.seed``)."""
    return ((r.get("config") or {}).get("run") or {}).get("seed")


def sides_by_seed(results: list[tuple[str, dict[str, Any]]], domains: list[str]) -> tuple[dict[str, Any], dict[int, dict[str, Any]]]:
    """The base side and every trained side of ``results`` ((path, result) pairs), by training
    seed: ``(base, {seed: {side: record}})``. A side reused from one result into another is one
    run (told apart by when it ran), taken once. Refuses results of other domains, held-out tasks,
    evaluation length or machine than the first's (their scores would not pair or compare), a
    base side of another model, a side trained for another budget, two different runs of one side
    with one seed (which to keep is the caller's choice), and a side whose recipe differs between
    seeds beyond ``run`` (its seed and where it ran): only the seed may differ."""
    if not results:
        raise SystemExit("--pool: no results given")
    first_path, first = results[0]
    keys = ("domains", "eval_size", "eval_tokens", "held_out")
    base: dict[str, Any] | None = None
    runs: dict[tuple[str, int], tuple[str, str, dict[str, Any]]] = {}  # (side, seed) -> (ran, path, record)
    minutes: set[float] = set()
    for path, res in results:
        if res.get("benchmark") != "multidomain" or (res.get("settings") or {}).get("domains") != domains:
            raise SystemExit(f"--pool {path}: not a multidomain result over the domains {domains}")
        for k in keys:
            if res["settings"].get(k) != first["settings"].get(k):
                raise SystemExit(f"--pool {path}: its {k} is not {first_path}'s: the sides would not pair task by task")
        mine, theirs = res.get("machine") or {}, first.get("machine") or {}
        if (mine.get("cpu"), mine.get("cpus_available")) != (theirs.get("cpu"), theirs.get("cpus_available")):
            raise SystemExit(f"--pool {path}: run on {mine.get('cpu')} ({mine.get('cpus_available')} cores), "
                             f"{first_path} on {theirs.get('cpu')} ({theirs.get('cpus_available')}): a wall-clock "
                             "budget buys other steps on another machine")
        for side, r in (res.get("sides") or {}).items():
            if "final" not in r:
                continue
            if side == "base":
                # untrained and greedy, so any base of the same model and domains is the base
                theirs_cfg, mine_cfg = (base or {}).get("config"), r.get("config")
                if isinstance(theirs_cfg, dict) and isinstance(mine_cfg, dict):
                    diffs = recipe_differences(theirs_cfg, mine_cfg, ("model", "domains"))
                    if diffs:
                        raise SystemExit(f"--pool {path}: its base side is another model or other domains: "
                                         + "; ".join(diffs[:6]))
                base = base or r
                continue
            seed = side_seed(r)
            if seed is None:
                raise SystemExit(f"--pool {path}: side {side} keeps no config with its seed")
            minutes.add(r.get("minutes", res["settings"].get("minutes")))
            ran = r.get("reused_from") or res.get("started")
            known = runs.get((side, seed))
            if known and known[0] != ran:
                raise SystemExit(f"--pool: two runs of {side} with seed {seed}, started {known[0]} ({known[1]}) and "
                                 f"{ran} ({path}): pool results holding one run of each side per seed")
            runs.setdefault((side, seed), (ran, path, r))
    if base is None:
        raise SystemExit("--pool: no result holds the base side")
    if len(minutes) > 1:
        raise SystemExit(f"--pool: sides trained for different budgets ({sorted(minutes)} minutes)")
    by_seed: dict[int, dict[str, Any]] = {}
    for (side, seed), (_, _, r) in sorted(runs.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        by_seed.setdefault(seed, {})[side] = r
    for side in {s for s, _ in runs}:
        seeds = sorted(seed for s, seed in runs if s == side)
        ref = runs[(side, seeds[0])][2]
        for seed in seeds[1:]:
            diffs = recipe_differences(ref["config"], runs[(side, seed)][2]["config"])
            if diffs:
                raise SystemExit(f"--pool: {side} with seed {seed} was trained under another recipe than with seed "
                                 f"{seeds[0]}: " + "; ".join(diffs[:6]))
    return base, by_seed


def pool_seeds(results: list[tuple[str, dict[str, Any]]], domains: list[str]) -> dict[str, Any]:
    """The target judged over several training seeds. Each seed whose mixed side and every single
    side ran is analysed on its own (:func:`analyse`); then each side's per-task scores are
    averaged over those seeds and the same analysis runs on the averages, which decides the
    target: a seed moves a side's mean by more than the gap judged (the twenty-third run: 0.08),
    so one seed a side cannot settle it. The pooled intervals are over tasks (the seeds' noise
    is averaged, not estimated); ``across_seeds`` gives the mixed - single gap per seed with a
    t-interval over seeds, which does estimate it. A gain that was one reply to most tasks in any
    seed does not count."""
    base, by_seed = sides_by_seed(results, domains)
    need = ["mixed", *(f"single:{d}" for d in domains)]
    complete = sorted(seed for seed, sides in by_seed.items() if all(s in sides for s in need))
    out: dict[str, Any] = {"seeds": complete,
                           "incomplete_seeds": {seed: sorted(s for s in need if s not in by_seed[seed])
                                                for seed in sorted(by_seed) if seed not in complete},
                           "per_seed": {}}
    if not complete:
        return out
    for seed in complete:
        sides = {"base": base, **{s: by_seed[seed][s] for s in need}}
        a = analyse({"sides": sides}, domains)
        out["per_seed"][seed] = {"target": a["target"], "steps": {s: len(sides[s].get("steps") or []) for s in need},
                                 "means": {s: mean_over(a["table"][s], domains) for s in ["base", *need]}}
    pooled: dict[str, Any] = {"base": base}
    for s in need:
        pooled[s] = {"final": {}}
        for d in domains:
            per = [by_seed[seed][s]["final"][d]["scores"] for seed in complete]
            ids = sorted(set.intersection(*(set(p) for p in per)))
            pooled[s]["final"][d] = {"scores": {i: sum(p[i] for p in per) / len(per) for i in ids}}
    a = analyse({"sides": pooled}, domains)
    t = a["target"]
    collapsed = {seed: out["per_seed"][seed]["target"]["collapsed_gains"] for seed in complete
                 if out["per_seed"][seed]["target"]["collapsed_gains"]}
    if collapsed:
        t["collapsed_gains"] = collapsed
        t["gains_on_every_domain"] = False
        t["met"] = False
    gaps = [out["per_seed"][seed]["target"]["mixed_minus_singles"]["mean"] for seed in complete]
    out["across_seeds"] = {"mixed_minus_singles": asdict(mean_ci(gaps)),
                           "met_in": [seed for seed in complete if out["per_seed"][seed]["target"]["met"]]}
    out["pooled"] = a
    return out


def pool_report(pool: dict[str, Any], domains: list[str], command: str) -> str:
    """Markdown for :func:`pool_seeds`: the seed-averaged table, each seed's verdict, the gap across
    seeds, and the pooled verdict."""
    lines = [f"### multidomain over training seeds {', '.join(str(s) for s in pool['seeds']) or '–'}"]
    for seed, missing in pool["incomplete_seeds"].items():
        lines.append(f"\nSeed {seed} left out: it lacks {', '.join(missing)}.")
    if not pool["seeds"]:
        return "\n".join([*lines, "", "No seed holds the mixed side and every single side: nothing to judge.",
                           "", f"Command: `{command}`"])
    table = pool["pooled"]["table"]
    rows = [[s, *(cell_text(table[s][d]) for d in domains), fmt(mean_over(table[s], domains))] for s in table]
    lines += ["", md_table(["side (per-task score averaged over seeds)", *domains, "mean over domains"], rows), ""]
    for seed, ps in pool["per_seed"].items():
        t = ps["target"]
        lines.append(f"- seed {seed}: mixed {fmt(t['mixed_mean_over_domains'])} ({ps['steps']['mixed']} steps), "
                     f"single runs on their own domain {fmt(t['singles_mean_own_domain'])} "
                     f"({', '.join(str(ps['steps'][f'single:{d}']) for d in domains)} steps); mixed - single "
                     f"{diff_text(t['mixed_minus_singles'])}; gains on every domain "
                     f"{'yes' if t['gains_on_every_domain'] else 'no'}, loses on none {'yes' if t['loses_on_none'] else 'no'}; "
                     f"target {'met' if t['met'] else 'not met'}.")
    gap = pool["across_seeds"]["mixed_minus_singles"]
    t = pool["pooled"]["target"]
    lines += [
        f"- across seeds, mixed - single: {ci_text(gap, signed=True)} "
        + (f"(t-interval over {gap['n']} seeds)." if gap["n"] > 1 else "(one seed: no interval over seeds)."),
        f"- seed-averaged: mixed vs base {', '.join(f'{d} {v}' for d, v in t['mixed_vs_base'].items())}; "
        f"mixed {fmt(t['mixed_mean_over_domains'])} against single runs on their own domain "
        f"{fmt(t['singles_mean_own_domain'])} (each single run's mean over every domain, averaged: "
        f"{fmt(t['singles_mean_over_domains'])}), mixed - single {diff_text(t['mixed_minus_singles'])}"
        + "".join(f"; seed {seed}'s gain on {', '.join(c)} was one reply to most tasks: not counted"
                  for seed, c in (t.get("collapsed_gains") or {}).items()) + ".",
        "- mixed vs single on its own domain, seed-averaged: " + ", ".join(
            f"{d} {diff_text(c)}" for d, c in t["mixed_vs_single_per_domain"].items()) + ".",
        f"- **target {'met' if t['met'] else 'not met'}** over seeds {', '.join(str(s) for s in pool['seeds'])}.",
        "", f"Command: `{command}`",
    ]
    return "\n".join(lines)


def result_shape_problem(res: Any) -> str | None:
    """What a result read for ``--pool`` lacks of what the pooling reads (None: nothing): an
    object with ``settings.domains`` and ``sides``, each finished side (one with ``final``) with
    per-task ``scores`` for every domain. A side without ``final`` did not finish and is left out."""
    if not isinstance(res, dict) or not isinstance(res.get("settings"), dict) or not isinstance(res.get("sides"), dict):
        return "a JSON object with settings and sides"
    domains = res["settings"].get("domains")
    if not isinstance(domains, list) or not domains:
        return "settings.domains, a list of domain names"
    for side, r in res["sides"].items():
        if not isinstance(r, dict):
            return f"side {side} is not an object"
        if "final" not in r:
            continue
        final = r["final"]
        missing = [d for d in domains if not (isinstance(final, dict) and isinstance(final.get(d), dict)
                                              and isinstance(final[d].get("scores"), dict))]
        if missing:
            return f"side {side} has no per-task scores of {', '.join(map(str, missing))}"
    return None


def pool_main(args: argparse.Namespace) -> None:
    results = []
    for path in args.pool:
        try:
            results.append((path, json.loads(Path(path).read_text())))
        except (OSError, ValueError) as e:
            raise SystemExit(f"--pool {path}: cannot read it as a result: {e}") from e
    for path, res in results:
        problem = result_shape_problem(res)
        if problem:
            raise SystemExit(f"--pool {path}: not a multidomain result this benchmark wrote: {problem}")
    domains = results[0][1]["settings"]["domains"]
    pool = pool_seeds(results, domains)
    result = {"benchmark": "multidomain_seeds", "command": command_line(), "from": list(args.pool),
              "domains": domains, "started": time.strftime("%Y-%m-%d %H:%M:%S"), **pool}
    text = pool_report(pool, domains, result["command"])
    result["markdown"] = text
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    write_result(out, result)
    print(text)
    print(f"\nwrote {out}")


# --- entry ---------------------------------------------------------------------------------------
def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--minutes", type=float, default=5.0, help="training time per side (evaluation excluded)")
    p.add_argument("--eval-size", type=int, default=200, help="held-out tasks per domain in the final evaluation")
    p.add_argument("--eval-tokens", type=int, default=None,
                   help="max new tokens in evaluation (default: the config's rollout.max_new_tokens)")
    p.add_argument("--drift-every", type=float, default=2.0,
                   help="mixed side: a held-out check for the drift guard every this many training minutes")
    p.add_argument("--drift-eval-size", type=int, default=50, help="held-out tasks per domain in each drift check")
    p.add_argument("--sides", default=None, help="comma-separated sides (default: base, mixed, ablation, single:D for each domain)")
    p.add_argument("--config", default=str(Path(__file__).with_name("multidomain.yaml")))
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a field of the config, for every side (repeatable)")
    p.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    p.add_argument("--max-steps", type=int, default=None, help="also stop each side after this many steps")
    p.add_argument("--single-checks", action="store_true",
                   help="run the drift guard's held-out checks (--drift-every) on single sides too, reaction warn, "
                        "to count what a specialist forgets (its training is unchanged; off: only the mixed side is checked)")
    p.add_argument("--out", default=None,
                   help="result JSON (default: benchmarks/out/multidomain.json; with --pool, multidomain_seeds.json)")
    p.add_argument("--pool", nargs="+", default=None, metavar="JSON",
                   help="train nothing: judge the target over the training seeds of these results (each side's "
                        "per-task scores averaged over the seeds that ran the mixed side and every single side)")
    p.add_argument("--reuse", default=None, metavar="JSON",
                   help="an earlier result of this benchmark: its sides that --sides does not run are taken from it "
                        "(same domains, held-out tasks paired by id), so a new run of one side is judged against the rest")
    p.add_argument("--reuse-other-budget", action="store_true",
                   help="with --reuse: take sides trained for another number of minutes too (a deliberate "
                        "comparison across budgets; the target is then not judged)")
    p.add_argument("--reuse-other-recipe", action="store_true",
                   help="with --reuse: take sides whose config differs from what this run would give them (another "
                        "--set, an edited config); the differences are reported and the target is then not judged")
    p.add_argument("--_worker", help=argparse.SUPPRESS)
    p.add_argument("--_result", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    args.out = args.out or f"benchmarks/out/multidomain{'_seeds' if args.pool else ''}.json"
    if args.eval_tokens is None:
        raw = read_raw(args.config, args.overrides)
        args.eval_tokens = int((raw.get("rollout") or {}).get("max_new_tokens", 64))
    return args


def held_out_fingerprints(domains, n: int) -> dict[str, str]:
    """Per domain, a digest of its first ``n`` held-out tasks (id, prompt, target): two results pair
    task by task only where these agree. Another ``eval_seed`` or another source section gives
    other tasks under the same ids."""
    import hashlib

    out = {}
    for d in domains:
        tasks = [[t.id, [m.model_dump(mode="json") for m in t.prompt], t.target] for t in d.source.eval_tasks()[:n]]
        out[d.name] = hashlib.sha256(json.dumps(tasks, sort_keys=True, default=str).encode()).hexdigest()[:16]
    return out


# Fields of a side's config that do not change what it learnt from: where and under which name it
# ran (its budget is checked on its own), and how fast the engine generated (max_batch and the cache
# sizes change steps in a budget, as any change of the code does: the report names each side's commit)
NOT_RECIPE = {"run", "base_dir", "eval.before", "eval.after", "model.device", "model.max_batch",
              "model.prefix_cache_mb", "model.kv_room", "model.kv_row_room"}


def recipe_differences(theirs: dict[str, Any], mine: dict[str, Any], only: tuple[str, ...] | None = None,
                       defaults: dict[str, Any] | None = None) -> list[str]:
    """Where a reused side's stored config (``theirs``) differs from the config this run would give
    that side (``mine``): ``path: theirs (this run: mine)`` per differing field, domains matched by
    name. A field ``theirs`` lacks was added to the config after that side ran, so it ran with what
    the field's default does: it differs where this run sets the field away from its default
    (``defaults``: a config of the same domains with every other field at its default; without it,
    such fields are skipped). ``only`` limits the comparison to these top-level sections."""
    out: list[str] = []

    def walk(a: Any, b: Any, d: Any, path: str) -> None:
        if path in NOT_RECIPE:
            return
        if isinstance(a, dict) and isinstance(b, dict):
            for k in sorted(b.keys()):
                sub = f"{path}.{k}" if path else k
                dk = d.get(k) if isinstance(d, dict) else None
                if k in a:
                    walk(a[k], b[k], dk, sub)
                elif isinstance(d, dict) and k in d and sub not in NOT_RECIPE and b[k] != d[k]:
                    out.append(f"{sub}: absent, its default then {json.dumps(d[k])} (this run: {json.dumps(b[k])})")
        elif path == "domains" and isinstance(a, list) and isinstance(b, list):
            na, nb = [x.get("name") for x in a], [y.get("name") for y in b]
            if na != nb:
                out.append(f"domains: {na} (this run: {nb})")
                return
            dd = {x.get("name"): x for x in d} if isinstance(d, list) else {}
            for x, y in zip(a, b):
                walk(x, y, dd.get(x.get("name")), f"domains.{x.get('name')}")
        elif a != b:
            out.append(f"{path}: {json.dumps(a)} (this run: {json.dumps(b)})")

    def keep(t: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in t.items() if only is None or k in only}

    walk(keep(theirs), keep(mine), keep(defaults) if defaults is not None else None, "")
    return out


def side_recipe(args: argparse.Namespace, side: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """This run's config of ``side``, and the same with its domains and model and every other field
    at its default: what a field a stored config lacks stood at (:func:`recipe_differences`)."""
    from practicum.config import validate_config

    cfg = side_config(args, side)
    # each domain by what names it (its name, kind and task source), every other field of it at its
    # default too: a domain field a stored side lacks was added later, so that side ran at its default
    domains = [{"name": d.name, "env": d.env, "source": d.source} for d in cfg.domains]
    raw = {"domains": domains, "model": cfg.model.model_dump(mode="json")}
    return cfg.model_dump(mode="json"), validate_config(raw, f"defaults ({side})").model_dump(mode="json")


def source_commit() -> str | None:
    """The commit of this checkout, with ``+changes`` when tracked files differ from it (None
    outside git): which engine and trainer code trained a side, a thing its config does not say."""
    import subprocess

    here = Path(__file__).resolve().parent
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=here, capture_output=True, text=True,
                              timeout=10, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=here,
                               capture_output=True, text=True, timeout=10, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return head + ("+changes" if dirty else "")


def reused_sides(path: str, domains: list[str], running: list[str], minutes: float | None = None,
                 eval_tokens: int | None = None, other_budget: bool = False,
                 held_out: Callable[[int], dict[str, str]] | None = None,
                 recipe: Callable[[str], tuple[dict[str, Any], dict[str, Any]]] | None = None,
                 other_recipe: bool = False) -> dict[str, Any]:
    """The sides of the earlier result at ``path`` that this run does not run itself, each marked
    with when it ran (a side that result had itself reused keeps its own date) and the minutes it
    trained for. Refuses a result of other domains (its held-out tasks would not pair) or of
    another evaluation length, one whose held-out tasks differ from this run's (``held_out(n)``
    gives this run's :func:`held_out_fingerprints` over the result's ``n`` tasks; a result
    written before results kept them is taken as it is), and - unless ``other_budget`` - a trained
    side of another training budget than ``minutes``: the target compares sides of one wall-clock
    budget. A side without its own record of minutes (results written before sides kept one) is
    taken at its result's. Unless ``other_recipe``, it also refuses a side trained under another
    recipe than this run would give it (``recipe(side)``: :func:`side_recipe`, compared by
    :func:`recipe_differences`; for base, which trains nothing, only its model and domains): a side
    reused across runs must not carry a learning rate or a reward this run no longer has. With
    ``other_recipe`` such a side is taken with its differences (``recipe_differs``), and the target
    is then not judged."""
    try:
        prior = json.loads(Path(path).read_text())
    except (OSError, ValueError) as e:
        raise SystemExit(f"--reuse {path}: cannot read it as a result: {e}") from e
    if not isinstance(prior, dict) or prior.get("benchmark") != "multidomain" or prior.get("settings", {}).get("domains") != domains:
        raise SystemExit(f"--reuse {path}: not a multidomain result over the domains {domains}")
    settings = prior["settings"]
    if eval_tokens is not None and settings.get("eval_tokens") not in (None, eval_tokens):
        raise SystemExit(f"--reuse {path}: its sides were evaluated with {settings['eval_tokens']} new tokens, "
                         f"this run with {eval_tokens}: their scores do not compare")
    if held_out is not None and settings.get("held_out"):
        mine = held_out(int(settings["eval_size"]))
        differ = [d for d in domains if settings["held_out"].get(d) != mine.get(d)]
        if differ:
            raise SystemExit(f"--reuse {path}: its held-out tasks of {', '.join(differ)} are not this run's (another "
                             "eval_seed, or another source section?): the sides would not pair task by task")
    out = {}
    for s, r in prior.get("sides", {}).items():
        if s in running or "final" not in r:
            continue
        side_minutes = r.get("minutes", settings.get("minutes"))
        if s != "base" and minutes is not None and side_minutes != minutes and not other_budget:
            raise SystemExit(f"--reuse {path}: side {s} trained for {side_minutes} minutes, this run trains for "
                             f"{minutes}: not the same budget (--reuse-other-budget compares them anyway, and "
                             "the target is then not judged)")
        entry = {**r, "reused_from": r.get("reused_from") or prior.get("started"), "minutes": side_minutes}
        entry.pop("recipe_differs", None)  # judged again against this run's recipe
        if recipe is not None and isinstance(r.get("config"), dict):
            mine, defaults = recipe(s)
            diffs = recipe_differences(r["config"], mine, ("model", "domains") if s == "base" else None, defaults)
            if diffs and not other_recipe:
                raise SystemExit(f"--reuse {path}: side {s} was trained under another recipe than this run's: "
                                 + "; ".join(diffs[:6]) + (f"; and {len(diffs) - 6} more" if len(diffs) > 6 else "")
                                 + " (--reuse-other-recipe takes it anyway, and the target is then not judged)")
            if diffs:
                entry["recipe_differs"] = diffs
        out[s] = entry
    return out


def main() -> None:
    args = parse_args()
    if args._worker:
        worker(args)
        return
    if args.pool:
        pool_main(args)
        return
    raw = read_raw(args.config, args.overrides)
    domains = [d["name"] for d in raw["domains"]]
    sides = [s.strip() for s in args.sides.split(",")] if args.sides else side_names(domains)
    unknown = [s for s in sides if s not in side_names(domains)]
    if unknown:
        raise SystemExit(f"unknown side(s) {unknown}; choose from {side_names(domains)}")
    out = Path(args.out)
    _, built = all_domains(args)
    held_out = held_out_fingerprints(built, args.eval_size)
    reused = (reused_sides(args.reuse, domains, sides, args.minutes, args.eval_tokens, args.reuse_other_budget,
                           held_out=lambda n: held_out if n == args.eval_size else held_out_fingerprints(built, n),
                           recipe=lambda s: side_recipe(args, s),
                           other_recipe=args.reuse_other_recipe)
              if args.reuse else {})
    result: dict[str, Any] = {
        "benchmark": "multidomain",
        "command": command_line(),
        "machine": machine_info(),
        "settings": {"minutes": args.minutes, "eval_size": args.eval_size, "eval_tokens": args.eval_tokens,
                     "drift_every": args.drift_every, "drift_eval_size": args.drift_eval_size,
                     "config": args.config, "overrides": args.overrides, "domains": domains, "sides": sides,
                     "held_out": held_out},
        "started": time.strftime("%Y-%m-%d %H:%M:%S"),
        "sides": dict(reused),
    }
    if reused:
        result["reused"] = {"from": args.reuse, "sides": list(reused)}
    argv = [str(Path(__file__).resolve()), *sys.argv[1:]]
    commit = source_commit()
    for s in sides:
        res = {**run_side(s, argv, side_file(out, s, ".part.json")), "minutes": args.minutes, "commit": commit}
        result["sides"][s] = res
        result["analysis"] = analyse(result, domains)
        out.parent.mkdir(parents=True, exist_ok=True)
        write_result(out, result)  # after each side, so a crash of the next loses nothing
    result["finished"] = time.strftime("%Y-%m-%d %H:%M:%S")
    finish(out, result, report(result, domains))


if __name__ == "__main__":
    main()
