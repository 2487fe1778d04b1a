"""A fading scaffold against the plain recipe, on a task whose format the model never writes.

The embedded SmolLM2-135M-Instruct answers reasoning-gym ``products`` (one-digit x one-digit
multiplication) right more often than not, but zero-shot it never writes the requested
``<answer>N</answer>``: 0 of 50 held-out problems greedy and 0 of 128 samples at temperature 1
(calibration in benchmarks/RESULTS.md). With the math domain's reward (0.7 strict + 0.3 lenient),
GRPO can still reinforce the right number, but never the format, because it never samples it.

Two sides, each in its own subprocess, one after the other, each trained for the same wall-clock
budget and evaluated at the same training times (0, E, 2E, ... minutes; evaluation time left
out of the training clock):

* ``plain``: benchmarks/scaffold_products.yaml minus its ``curriculum.scaffold`` (the normal
  recipe: the system prompt asks for the tags, nothing shows them);
* ``scaffold``: the same config with the scaffold: worked examples of *other* multiplications
  (two-digit ones, so never a held-out question) shown before the question, fading linearly
  over the first steps, with a probe share of unscaffolded groups measuring success without it.

Evaluation is greedy over the held-out problems, never scaffolded (the script asserts that no
held-out task carries ``metadata["scaffold"]``; ``practicum.evaluation`` refuses one too):
strict (right answer inside the tags), lenient (right when the last number is read), format
(exactly one tag pair), with a 95% Wilson interval for strict.

    python benchmarks/scaffold_products.py --minutes 30 --eval-every 5
    python benchmarks/scaffold_products.py --minutes 1 --eval-every 1 --eval-size 20   # smoke test
    python benchmarks/scaffold_products.py --sides scaffold --set trainer.lr=3e-5

Target (issue 12): the scaffold side above 0.3 held-out strict accuracy within 30 minutes on
2 cores, where the plain side stays at 0.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import sys
import time
from pathlib import Path
from typing import Any

from common import (
    EvalSchedule,
    RssSampler,
    current_rss_mb,
    finish,
    fmt,
    log,
    machine_info,
    machine_line,
    md_table,
    new_result,
    parse_sides,
    peak_rss_mb,
    run_side,
    write_result,
)

SIDES = ("plain", "scaffold")
COMPONENTS = ("strict", "lenient", "format")


# --- pure helpers (tests/test_bench_scaffold_products.py) ---------------------------------------
def wilson(k: float, n: int, z: float = 1.96) -> tuple[float, float]:
    """95% Wilson score interval of a proportion k/n (``(0, 1)`` when n is 0)."""
    if n <= 0:
        return 0.0, 1.0
    p = k / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def eval_point(rows: list[Any]) -> dict[str, Any]:
    """Means of the score components over held-out rows (each with ``components``), and the
    Wilson interval of strict accuracy."""
    n = len(rows)
    out: dict[str, Any] = {"n": n}
    for c in COMPONENTS:
        out[c] = sum(r.components.get(c, 0.0) for r in rows) / n if n else 0.0
    lo, hi = wilson(sum(r.components.get("strict", 0.0) for r in rows), n)
    out["strict_ci"] = [lo, hi]
    return out


def side_overrides(side: str, out_dir: Path, eval_tokens: int, extra: list[str]) -> list[str]:
    """Config overrides of a side: ``plain`` is the config without its scaffold, nothing else."""
    if side not in SIDES:
        raise ValueError(f"unknown side {side!r}; choose from {SIDES}")
    return [
        *extra,
        *(["curriculum.scaffold={}"] if side == "plain" else []),
        f"run.dir={out_dir / f'scaffold_products_{side}_run'}",
        "eval.before=false",
        "eval.after=false",
        f"eval.max_new_tokens={eval_tokens}",
    ]


def split_by_help(groups: list[Any]) -> dict[str, dict[str, float]]:
    """Means of the score components over the episodes that ran with the scaffold's help
    (``help``; in a guided group only some do) and without it (``bare``), with their episode
    counts: the bare ones show whether the format is sampled without help, which is what GRPO
    needs before it can reinforce it."""
    from practicum.rollout import was_helped

    out: dict[str, dict[str, float]] = {}
    for key, want in (("help", True), ("bare", False)):
        eps = [e for g in groups for e in g.episodes if e.score is not None and was_helped(e) == want]
        out[key] = {"n": float(len(eps)), **{c: (sum(e.score.components.get(c, 0.0) for e in eps) / len(eps)
                                                 if eps else 0.0) for c in COMPONENTS}}
    return out


def first_reaching(evals: list[dict[str, Any]], key: str, level: float) -> dict[str, Any] | None:
    """The first evaluation whose ``key`` is above ``level``, or None."""
    return next((e for e in evals if e[key] > level), None)


# --- one side -----------------------------------------------------------------------------------
def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--minutes", type=float, default=30.0, help="training time per side (evaluation excluded)")
    p.add_argument("--eval-every", type=float, default=5.0, help="evaluate every this many training minutes")
    p.add_argument("--eval-size", type=int, default=None,
                   help="evaluate on the first N held-out problems (default: all of the domain's eval_size)")
    p.add_argument("--eval-tokens", type=int, default=64, help="max new tokens in evaluation (greedy)")
    p.add_argument("--sides", default=",".join(SIDES), help=f"comma-separated sides to run, in order (default: {','.join(SIDES)})")
    p.add_argument("--out", default="benchmarks/out/scaffold_products.json", help="result JSON")
    p.add_argument("--config", default=str(Path(__file__).with_name("scaffold_products.yaml")),
                   help="the scaffold side's config; the plain side is the same minus curriculum.scaffold")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a field of both sides' config (repeatable)")
    p.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    p.add_argument("--max-steps", type=int, default=None, help="also stop each side after this many steps")
    p.add_argument("--_worker", choices=SIDES, help=argparse.SUPPRESS)
    p.add_argument("--_result", help=argparse.SUPPRESS)
    return p.parse_args(argv)


async def side_main(args: argparse.Namespace, sampler: RssSampler) -> dict[str, Any]:
    import torch

    from practicum.config import load_config
    from practicum.curriculum.scaffold import is_scaffolded
    from practicum.loop import Run
    from practicum.records import GroupState

    side = args._worker
    overrides = side_overrides(side, Path(args.out).resolve().parent, args.eval_tokens, args.overrides)
    cfg = load_config(args.config, overrides)
    if args.threads:
        torch.set_num_threads(args.threads)
    if len(cfg.domains) != 1:
        raise SystemExit(f"{args.config}: the benchmark needs exactly one domain, got {len(cfg.domains)}")
    run = Run(cfg, overwrite=True, log=log)
    domain = run.domains[0]
    name = domain.name
    held_out = domain.source.eval_tasks()[:args.eval_size]
    leaks = [t.id for t in held_out if is_scaffolded(t)]
    assert not leaks, f"held-out tasks carry a scaffold: {leaks[:5]}"
    scaffold_cfg = cfg.curriculum.scaffold.get(name)
    if scaffold_cfg is not None:  # a worked example that is a held-out question would leak its answer
        questions = getattr(domain.source, "held_out_questions", frozenset())
        leaked = [ex.question for ex in scaffold_cfg.examples if ex.question in questions]
        assert not leaked, f"scaffold examples are held-out questions: {leaked}"
    scaffold = run.driver.cur.scaffolds.get(name)
    sched = EvalSchedule(args.minutes, args.eval_every)
    evals: list[dict[str, Any]] = []
    steps: list[dict[str, Any]] = []

    async def do_eval(point: float, step: int, train_s: float) -> None:
        sampler.phase = "eval"
        t0 = time.perf_counter()
        res = await run.evaluate(step, args.eval_size)
        rows = [r for r in res.per_task if r.domain == name]
        m = eval_point(rows)
        m["seconds"] = time.perf_counter() - t0
        sampler.phase = "train"
        evals.append({"minutes": point, "train_minutes": train_s / 60, "step": step, **m})
        lo, hi = m["strict_ci"]
        log(f"[eval] {side} t={train_s / 60:.2f} min (step {step}): strict {m['strict']:.3f} [{lo:.3f}, {hi:.3f}] "
            f"lenient {m['lenient']:.3f} format {m['format']:.3f} (n={m['n']}, {m['seconds']:.0f} s)")

    try:
        async with run.orch.paused():  # nothing is drawn before the clock starts
            await run.start()
            await do_eval(0.0, 0, 0.0)
        train_s = 0.0
        step = 0
        while True:
            step += 1
            t0 = time.perf_counter()
            m = await run.train_step(step)
            dt = time.perf_counter() - t0
            train_s += dt
            split = split_by_help(run.store.groups(step=step, kind="train", state=GroupState.trained))
            steps.append({
                "step": step,
                "step_seconds": dt,
                "train_seconds": train_s,
                "gen_seconds": m["wait_seconds"],  # waiting for the step's groups: their rollout (synchronous loop)
                "update_seconds": m.get("train_seconds"),
                "reward": m.get(f"{name}/reward"),
                **{c: m.get(f"{name}/{c}") for c in COMPONENTS},
                "scaffold_level": m.get(f"{name}/scaffold_level", 0.0),
                "scaffolded": m.get(f"{name}/scaffolded", 0.0),
                "help": split["help"],
                "bare": split["bare"],
                # mean reward of the last `window` unscaffolded episodes: the scaffold's own measure
                "unaided_reward": (sum(scaffold.unaided) / len(scaffold.unaided)) if scaffold and scaffold.unaided else None,
                "uniform_groups": m["uniform_groups"],
                "zero_grad": bool(m["skipped"]),
                "completion_len": m["completion_len"],
                "loss": m.get("loss"),
                "notes": list(m.get("notes", [])),
                "rss_mb": current_rss_mb(),
            })
            b = split["bare"]
            log(run.summary(step, m) + f" | scaffolded {m.get(f'{name}/scaffolded', 0.0):.2f} | without help: "
                f"format {b['format']:.2f} strict {b['strict']:.2f} (n={int(b['n'])}) | train {train_s / 60:.2f} min")
            point = sched.due(train_s)
            stop = sched.done(train_s) or (args.max_steps is not None and step >= args.max_steps)
            if stop and point is None:
                point = train_s / 60
            if point is not None:
                # no rollouts during evaluation, whose time is not training time: nothing new is
                # drawn, and groups already running finish on the training clock first
                async with run.orch.paused():
                    t0 = time.perf_counter()
                    await run.orch.drain()
                    train_s += time.perf_counter() - t0
                    await do_eval(point, step, train_s)
            if stop:
                break
    finally:
        await run.aclose()
    return {
        "overrides": overrides,
        "config": cfg.model_dump(mode="json"),
        "scaffold": None if scaffold_cfg is None else scaffold_cfg.model_dump(mode="json"),
        "scaffold_removed_at": None if scaffold is None else scaffold.removed_at,
        "evals": evals,
        "steps": steps,
    }


def worker(args: argparse.Namespace) -> None:
    with RssSampler() as sampler:
        t0 = time.perf_counter()
        res = asyncio.run(side_main(args, sampler))
        res["worker_seconds"] = time.perf_counter() - t0
    res["peak_rss_mb_by_phase"] = dict(sampler.peaks)
    res["peak_rss_mb_self"] = peak_rss_mb()
    res["machine"] = machine_info()
    write_result(args._result, res)


# --- report -------------------------------------------------------------------------------------
def ci_text(e: dict[str, Any]) -> str:
    lo, hi = e["strict_ci"]
    return f"{e['strict']:.3f} [{lo:.2f}, {hi:.2f}]"


def report(result: dict[str, Any]) -> str:
    sides = [s for s in SIDES if "evals" in result["sides"].get(s, {})]
    points = sorted({e["minutes"] for s in sides for e in result["sides"][s]["evals"]})
    header = ["train min"]
    for s in sides:
        header += [f"{s} step", f"{s} strict [95% CI]", f"{s} lenient", f"{s} format"]
    rows = []
    for pt in points:
        row: list[Any] = [f"{pt:g}"]
        for s in sides:
            e = next((e for e in result["sides"][s]["evals"] if e["minutes"] == pt), None)
            row += ["–"] * 4 if e is None else [str(e["step"]), ci_text(e), e["lenient"], e["format"]]
        rows.append(row)
    srows = []
    for s in sides:
        side = result["sides"][s]
        st = side["steps"]
        gone = next((x["step"] for x in st if x["scaffolded"] == 0 and x["scaffold_level"] == 0), None)
        srows.append([s, str(len(st)), fmt(st[-1]["train_seconds"] / len(st) if st else None, 1),
                      fmt(sum(x["completion_len"] for x in st) / len(st) if st else None, 1),
                      "–" if s == "plain" or gone is None else str(gone), "–" if side.get("scaffold_removed_at") is None
                      else str(side["scaffold_removed_at"]),
                      fmt((side.get("process_peak_rss_mb") or 0) / 1024 or None, 2)])
    n_eval = next((e["n"] for s in sides for e in result["sides"][s]["evals"]), 0)
    verdict = []
    if "scaffold" in sides:
        hit = first_reaching(result["sides"]["scaffold"]["evals"], "strict", 0.3)
        verdict.append("scaffold: strict above 0.3 " + (f"first at {hit['minutes']:g} min (step {hit['step']}, "
                                                         f"{ci_text(hit)})" if hit else "never"))
    if "plain" in sides:
        best = max(e["strict"] for e in result["sides"]["plain"]["evals"])
        verdict.append(f"plain: best strict {best:.3f}")
    return "\n".join([
        f"### scaffold_products: held-out accuracy vs training time ({n_eval} held-out problems, greedy, "
        f"{result['settings']['eval_tokens']} tokens, no scaffold)",
        "",
        md_table(header, rows),
        "",
        md_table(["side", "steps", "s/step", "mean completion tokens", "first step without help",
                  "removed by threshold at step", "peak RSS (GB)"], srows),
        "",
        "; ".join(verdict) + ".",
        f"Machine: {machine_line(result['machine'])}.",
        f"Command: `{result['command']}`",
    ])


def main() -> None:
    args = parse_args()
    if args._worker:
        worker(args)
        return
    out = Path(args.out)
    sides = parse_sides(args.sides, SIDES)
    result = new_result("scaffold_products", {"minutes": args.minutes, "eval_every": args.eval_every,
                                              "eval_size": args.eval_size, "eval_tokens": args.eval_tokens,
                                              "config": args.config, "overrides": args.overrides})
    argv = [str(Path(__file__).resolve()), *sys.argv[1:]]
    for s in sides:
        res = run_side(s, argv, out.parent / f"scaffold_products_{s}.part.json")
        result["sides"][s] = res
        out.parent.mkdir(parents=True, exist_ok=True)
        write_result(out, result)  # after each side, so a crash of the next loses nothing
    finish(out, result, report(result))


if __name__ == "__main__":
    main()
