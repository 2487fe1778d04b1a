"""Learning speed: Practicum against TRL's GRPOTrainer on the embedded model, side by side.

Both sides train SmolLM2-135M-Instruct (full fine-tune) on reasoning-gym ``chain_sum``
(2 terms, 1-2 digits) with the same prompts, the same reward (the score of Practicum's
MathEnv: strict/lenient/format with the domain's weights) and the same held-out set (500
questions that training never samples). Each side runs in its own subprocess, one after the
other, so they never share cores. Both are evaluated identically -- Practicum's greedy
held-out evaluation through an HFEngine holding the side's current weights, 64 new tokens --
at training times 0, E, 2E, ... minutes; evaluation time is left out of training time.

    python benchmarks/learn_arithmetic.py --minutes 30 --eval-every 5
    python benchmarks/learn_arithmetic.py --only trl          # one side, for debugging
    python benchmarks/learn_arithmetic.py --sides trl,practicum
    python benchmarks/learn_arithmetic.py --matched           # Practicum with TRL's hyperparameters

TRL side: GRPOTrainer, 2 prompts x 8 samples per step (per_device_train_batch_size 16,
num_generations 8), max_completion_length 64, lr 1e-5 (constant), temperature 1.0, beta 0,
bf16=True on CPU (autocast; fp32 weights) where the CPU has bf16 instructions, else fp32
(``--precision``; both sides always use the same), no vLLM, no gradient checkpointing (TRL turns
it on by default; off is faster here and memory is plentiful), logging every step.
Practicum sides: ``practicum.loop.Run`` from benchmarks/learn_arithmetic.yaml, stepping
``run.train_step``: ``practicum`` with the synchronous orchestrator (async.max_staleness 0),
``practicum-async1`` with max_staleness 1 (the next step's rollouts run during the update). No
rollout runs during an evaluation: the orchestrator is paused and drained first, on the
training clock.

Output: a JSON file (both curves, per-step records, machine, command) and markdown tables on
stdout, ready for benchmarks/RESULTS.md.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from pathlib import Path
from typing import Any

from common import (
    EvalSchedule,
    RssSampler,
    aevaluate_engine,
    build_single_domain,
    command_line,
    completion_text,
    current_rss_mb,
    eval_line,
    evaluate_engine,
    finish,
    fmt,
    load_cfg,
    log,
    machine_info,
    machine_line,
    make_engine,
    md_table,
    mean,
    median,
    messages_as_dicts,
    peak_rss_mb,
    practicum_run,
    run_side,
    score_texts,
    timed_grpo_trainer_class,
    write_result,
)

SIDES = ("trl", "practicum", "practicum-async1")
ASYNC = {"practicum": 0, "practicum-async1": 1}  # Practicum's sides: async.max_staleness

# TRL's side, fixed by the benchmark's definition
TRL_PROMPTS_PER_STEP = 2
TRL_GROUP = 8
TRL_MAX_COMPLETION = 64
TRL_LR = 1e-5
TRL_TEMPERATURE = 1.0

# --matched: Practicum with the same hyperparameters as TRL's side
MATCHED = [
    f"rollout.prompts_per_step={TRL_PROMPTS_PER_STEP}",
    f"rollout.group_size={TRL_GROUP}",
    f"rollout.temperature={TRL_TEMPERATURE}",
    f"rollout.max_new_tokens={TRL_MAX_COMPLETION}",
    f"trainer.lr={TRL_LR}",
    "trainer.beta2=0.999",  # transformers' AdamW default
    "algorithm.clip_high=0.2",  # TRL's epsilon_high defaults to epsilon
    "algorithm.aggregation=token_mean",  # TRL's default loss_type 'dapo'
]


KINDS = ("add", "add-carry", "sub", "sub-borrow", "sub-neg")


def problem_kind(task: Any) -> str:
    """The kind of a chain_sum problem, for accuracy by kind: ``add`` / ``add-carry`` (the units
    carry), ``sub`` / ``sub-borrow`` (the units borrow), ``sub-neg`` (the result is negative)."""
    a, op, b = task.metadata["entry"]["metadata"]["expression"].split()
    x, y = int(a), int(b)
    if op == "+":
        return "add-carry" if x % 10 + y % 10 >= 10 else "add"
    if x < y:
        return "sub-neg"
    return "sub-borrow" if x % 10 < y % 10 else "sub"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--minutes", type=float, default=30.0, help="training time per side (evaluation excluded)")
    p.add_argument("--eval-every", type=float, default=5.0, help="evaluate every this many training minutes")
    p.add_argument("--eval-size", type=int, default=None,
                   help="evaluate on the first N held-out problems (default: all of the domain's eval_size)")
    p.add_argument("--eval-tokens", type=int, default=64, help="max new tokens in evaluation (greedy)")
    p.add_argument("--only", choices=SIDES, help="run one side only")
    p.add_argument("--sides", default=None, help=f"comma-separated sides to run (default: all of {', '.join(SIDES)})")
    p.add_argument("--precision", choices=["auto", "bf16", "fp32"], default="auto",
                   help="both sides: bf16 (TRL bf16=True; Practicum bf16 engine and autocast) or fp32; "
                        "auto: bf16 where the CPU has bf16 instructions, else fp32 (bf16 is emulated there, ~4x slower)")
    p.add_argument("--out", default="benchmarks/out/learn_arithmetic.json", help="result JSON")
    p.add_argument("--config", default=str(Path(__file__).with_name("learn_arithmetic.yaml")),
                   help="Practicum's side config; its domain also defines TRL's prompts and the held-out set")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a field of Practicum's config (repeatable)")
    p.add_argument("--matched", action="store_true", help="Practicum with TRL's hyperparameters: " + " ".join(MATCHED))
    p.add_argument("--threads", type=int, default=None, help="torch threads on both sides (default: torch's)")
    p.add_argument("--parallel", action="store_true",
                   help="run the sides at once with 1 torch thread each (pinned to a core each when there are enough cores)")
    p.add_argument("--max-steps", type=int, default=None, help="also stop each side after this many steps")
    p.add_argument("--trl-tasks", type=int, default=None,
                   help="training prompts given to TRL (default: enough for one step per 0.5 s)")
    p.add_argument("--trl-gradient-checkpointing", action="store_true",
                   help="turn on TRL's default gradient checkpointing (slower)")
    p.add_argument("--trl-lr-scheduler", default="constant",
                   help="TRL's lr_scheduler_type (default constant, like Practicum; transformers' default is linear)")
    p.add_argument("--_worker", choices=SIDES, help=argparse.SUPPRESS)
    p.add_argument("--_result", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.precision == "auto":
        from practicum.hardware import native_bf16

        args.precision = "bf16" if native_bf16("cpu") else "fp32"
    if args.parallel and args.threads is None:
        args.threads = 1  # one core per side
    return args


def practicum_overrides(args: argparse.Namespace, side: str = "practicum") -> list[str]:
    out_dir = Path(args.out).resolve().parent
    bf16 = args.precision == "bf16"
    return [
        *(MATCHED if args.matched else []),
        f"model.engine_dtype={'bfloat16' if bf16 else 'float32'}",
        f"trainer.autocast_dtype={'bfloat16' if bf16 else 'none'}",
        f"async.max_staleness={ASYNC.get(side, 0)}",
        *args.overrides,
        f"run.dir={out_dir / f'learn_arithmetic_{side}_run'}",
        "eval.before=false",
        "eval.after=false",
        f"eval.max_new_tokens={args.eval_tokens}",
    ]


# --- Practicum's side -----------------------------------------------------------------------
async def practicum_main(args: argparse.Namespace, sampler: RssSampler) -> dict[str, Any]:
    run = practicum_run(args.config, practicum_overrides(args, args._worker), args.threads)
    cfg = run.cfg
    domain = run.domains[0]
    sched = EvalSchedule(args.minutes, args.eval_every)
    evals: list[dict[str, Any]] = []
    steps: list[dict[str, Any]] = []

    async def do_eval(point: float, step: int, train_s: float) -> None:
        sampler.phase = "eval"
        m = await aevaluate_engine(run.engine, domain, args.eval_tokens, args.eval_size, problem_kind)
        sampler.phase = "train"
        evals.append({"minutes": point, "train_minutes": train_s / 60, "step": step, **m})
        log(eval_line(f"{args._worker} t={train_s / 60:.2f} min (step {step})", m))

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
            steps.append({
                "step": step,
                "step_seconds": dt,
                "train_seconds": train_s,
                "gen_seconds": m["wait_seconds"],
                "update_seconds": m.get("train_seconds"),
                "reward": m.get(f"{domain.name}/reward"),
                "strict": m.get(f"{domain.name}/strict"),
                "lenient": m.get(f"{domain.name}/lenient"),
                "format": m.get(f"{domain.name}/format"),
                "uniform_groups": m["uniform_groups"],
                "zero_grad": bool(m["skipped"]),
                "completion_len": m["completion_len"],
                "gen_tokens": m["gen_tokens"],
                "tokens_trained": m.get("tokens_trained", 0.0),
                "loss": m.get("loss"),
                "rss_mb": current_rss_mb(),
            })
            log(run.summary(step, m) + f" | train {train_s / 60:.2f} min")
            point = sched.due(train_s)
            stop = sched.done(train_s) or (args.max_steps is not None and step >= args.max_steps)
            if stop and point is None:
                point = train_s / 60
            if point is not None:
                # Rollouts must not run during evaluation, whose time is not training time: no new
                # groups are drawn, and those already running finish on the training clock first.
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
        "config": cfg.model_dump(mode="json"),
        "settings": {
            "prompts_per_step": cfg.rollout.prompts_per_step,
            "group_size": cfg.rollout.group_size,
            "max_new_tokens": cfg.rollout.max_new_tokens,
            "temperature": cfg.rollout.temperature,
            "lr": cfg.trainer.lr,
            "engine_dtype": cfg.model.engine_dtype,
            "autocast_dtype": cfg.trainer.autocast_dtype,
        },
        "evals": evals,
        "steps": steps,
    }


# --- TRL's side ---------------------------------------------------------------------------------
def trl_main(args: argparse.Namespace, sampler: RssSampler) -> dict[str, Any]:
    import torch
    from datasets import Dataset
    from transformers import TrainerCallback
    from trl import GRPOConfig

    from practicum.models import resolve_model

    cfg = load_cfg(args.config, practicum_overrides(args))  # the domain (prompts, reward, held-out set)
    if args.threads:
        torch.set_num_threads(args.threads)
    domain = build_single_domain(cfg)
    model_path = resolve_model(cfg.model.name)
    n_tasks = args.trl_tasks or max(64, int(args.minutes * 60 / 0.5) * TRL_PROMPTS_PER_STEP)
    if args.max_steps:
        n_tasks = min(n_tasks, args.max_steps * TRL_PROMPTS_PER_STEP)
    t0 = time.perf_counter()
    # the task stream Practicum's sampler uses: step s takes train_task(s*P .. s*P+P-1), from step 1
    first = TRL_PROMPTS_PER_STEP
    tasks = {i: domain.source.train_task(i) for i in range(first, first + n_tasks)}
    held_out = domain.source.held_out_questions if hasattr(domain.source, "held_out_questions") else frozenset()
    leaked = sum(t.prompt[-1].content in held_out for t in tasks.values())
    assert leaked == 0, f"{leaked} training prompts are held-out questions"
    dataset = Dataset.from_list([{"prompt": messages_as_dicts(t), "task_index": i} for i, t in tasks.items()])
    log(f"[trl] {n_tasks} training prompts built in {time.perf_counter() - t0:.1f} s")

    train_components: list[dict[str, float]] = []

    def arithmetic_reward(prompts, completions, task_index, **kwargs):
        """The score value of Practicum's MathEnv for each completion."""
        scores = score_texts(domain, [tasks[i] for i in task_index], [completion_text(c) for c in completions])
        train_components.append({k: mean([s.components.get(k, 0.0) for s in scores])
                                 for k in ("strict", "lenient", "format")})
        return [s.value for s in scores]

    targs = GRPOConfig(
        output_dir=str(Path(args.out).resolve().parent / "learn_arithmetic_trl_run"),
        per_device_train_batch_size=TRL_PROMPTS_PER_STEP * TRL_GROUP,
        num_generations=TRL_GROUP,
        gradient_accumulation_steps=1,
        max_completion_length=TRL_MAX_COMPLETION,
        learning_rate=TRL_LR,
        lr_scheduler_type=args.trl_lr_scheduler,
        temperature=TRL_TEMPERATURE,
        beta=0.0,
        bf16=args.precision == "bf16",
        use_cpu=True,
        use_vllm=False,
        gradient_checkpointing=args.trl_gradient_checkpointing,
        shuffle_dataset=False,
        logging_steps=1,
        report_to="none",
        save_strategy="no",
        max_steps=n_tasks // TRL_PROMPTS_PER_STEP,
        seed=cfg.run.seed,
        dataloader_num_workers=0,
        disable_tqdm=True,
    )
    engine = make_engine(cfg, model_path)  # evaluation only: the TRL model's weights are copied in
    sched = EvalSchedule(args.minutes, args.eval_every)
    evals: list[dict[str, Any]] = []
    steps: list[dict[str, Any]] = []
    step_logs: dict[int, dict[str, Any]] = {}

    def do_eval(model, point: float, step: int, train_s: float) -> None:
        sampler.phase = "eval"
        engine.load_weights(getattr(model, "module", model).state_dict(), step)
        m = evaluate_engine(engine, domain, args.eval_tokens, args.eval_size, problem_kind)
        sampler.phase = "train"
        evals.append({"minutes": point, "train_minutes": train_s / 60, "step": step, **m})
        log(eval_line(f"trl t={train_s / 60:.2f} min (step {step})", m))

    class Clock(TrainerCallback):
        def __init__(self) -> None:
            self.train_s = 0.0
            self.last = 0.0

        def on_train_begin(self, args_, state, control, model=None, **kw):
            do_eval(model, 0.0, 0, 0.0)
            self.last = time.perf_counter()

        def on_step_end(self, args_, state, control, model=None, **kw):
            dt = time.perf_counter() - self.last
            self.train_s += dt
            steps.append({"step": state.global_step, "step_seconds": dt, "train_seconds": self.train_s,
                          "rss_mb": current_rss_mb()})
            point = sched.due(self.train_s)
            stop = sched.done(self.train_s) or (args.max_steps is not None and state.global_step >= args.max_steps)
            if stop and point is None:
                point = self.train_s / 60
            if point is not None:
                do_eval(model, point, state.global_step, self.train_s)
            if stop:
                control.should_training_stop = True
            self.last = time.perf_counter()  # evaluation is not training time
            return control

        def on_log(self, args_, state, control, logs=None, **kw):
            if logs:
                step_logs.setdefault(state.global_step, {}).update(logs)

    trainer = timed_grpo_trainer_class()(
        model=str(model_path),
        reward_funcs=arithmetic_reward,
        args=targs,
        train_dataset=dataset,
        callbacks=[Clock()],
    )
    sampler.phase = "train"
    trainer.train()

    gen_seconds = getattr(trainer, "gen_seconds", [])
    for i, s in enumerate(steps):
        lg = step_logs.get(s["step"], {})
        comps = train_components[i] if i < len(train_components) else {}
        frac0 = lg.get("frac_reward_zero_std")
        mean_len = lg.get("completions/mean_length")
        s.update({
            "reward": lg.get("reward"),
            "strict": comps.get("strict"),
            "lenient": comps.get("lenient"),
            "format": comps.get("format"),
            "reward_std": lg.get("reward_std"),
            "uniform_groups": frac0,  # share of samples (= of groups) whose group had zero reward std
            "zero_grad": None if frac0 is None else bool(frac0 >= 1.0 - 1e-9),
            "completion_len": mean_len,
            "gen_tokens": None if mean_len is None else mean_len * TRL_PROMPTS_PER_STEP * TRL_GROUP,
            "gen_seconds": gen_seconds[i] if i < len(gen_seconds) else None,
            "trl_step_time": lg.get("step_time"),
            "loss": lg.get("loss"),
            "grad_norm": lg.get("grad_norm"),
        })
    return {
        "settings": {
            "prompts_per_step": TRL_PROMPTS_PER_STEP,
            "group_size": TRL_GROUP,
            "max_completion_length": TRL_MAX_COMPLETION,
            "temperature": TRL_TEMPERATURE,
            "lr": TRL_LR,
            "lr_scheduler_type": args.trl_lr_scheduler,
            "beta": 0.0,
            "bf16": args.precision == "bf16",
            "gradient_checkpointing": args.trl_gradient_checkpointing,
            "loss_type": targs.loss_type,
            "scale_rewards": targs.scale_rewards,
            "epsilon": targs.epsilon,
            "training_prompts": n_tasks,
        },
        "eval_engine_weights_mb": sum(p.numel() * p.element_size() for p in engine.model.parameters()) / 2**20,
        "evals": evals,
        "steps": steps,
    }


# --- worker entry and report ------------------------------------------------------------------
def worker(args: argparse.Namespace) -> None:
    with RssSampler() as sampler:
        t0 = time.perf_counter()
        if args._worker in ASYNC:
            res = asyncio.run(practicum_main(args, sampler))
        else:
            res = trl_main(args, sampler)
        res["worker_seconds"] = time.perf_counter() - t0
    res["peak_rss_mb_by_phase"] = dict(sampler.peaks)
    res["peak_rss_mb_self"] = peak_rss_mb()
    res["machine"] = machine_info()
    write_result(args._result, res)


def summarise(side: dict[str, Any]) -> dict[str, Any]:
    steps = side.get("steps") or []
    st = [s["step_seconds"] for s in steps]
    zg = [s["zero_grad"] for s in steps if s.get("zero_grad") is not None]
    ev = side.get("evals") or []
    return {
        "steps": len(steps),
        "train_minutes": steps[-1]["train_seconds"] / 60 if steps else 0.0,
        "step_seconds_median": median(st),
        "gen_seconds_median": median([s.get("gen_seconds") for s in steps]),
        "step_seconds_first10": mean(st[:10]),
        "step_seconds_last10": mean(st[-10:]),
        "zero_grad_step_fraction": (sum(zg) / len(zg)) if zg else None,
        "uniform_group_fraction_mean": mean([s.get("uniform_groups") for s in steps]),
        "completion_len_mean": mean([s.get("completion_len") for s in steps]),
        "peak_rss_train_gb": (side.get("peak_rss_mb_by_phase", {}).get("train") or 0) / 1024 or None,
        "peak_rss_process_gb": (side.get("process_peak_rss_mb") or 0) / 1024 or None,
        "eval_seconds_total": sum(e["seconds"] for e in ev),
        "first_eval": {k: ev[0].get(k) for k in ("strict", "lenient", "format")} if ev else None,
        "last_eval": {k: ev[-1].get(k) for k in ("strict", "lenient", "format")} if ev else None,
        "wall_seconds": side.get("wall_seconds"),
    }


def report(result: dict[str, Any]) -> str:
    sides = [s for s in SIDES if s in result["sides"] and "evals" in result["sides"][s]]
    names = {"trl": "TRL", "practicum": "Practicum", "practicum-async1": "Practicum async1"}
    points = sorted({e["minutes"] for s in sides for e in result["sides"][s]["evals"]})
    header = ["train min"]
    for s in sides:
        header += [f"{names[s]} step", f"{names[s]} strict", f"{names[s]} lenient", f"{names[s]} format"]
    rows = []
    for pt in points:
        row: list[Any] = [f"{pt:g}"]
        for s in sides:
            e = next((e for e in result["sides"][s]["evals"] if e["minutes"] == pt), None)
            row += ["–"] * 4 if e is None else [str(e["step"]), e["strict"], e["lenient"], e["format"]]
        rows.append(row)
    t1 = md_table(header, rows)
    srows = []
    for s in sides:
        m = result["sides"][s]["summary"]
        set_ = result["sides"][s]["settings"]
        batch = f"{set_['prompts_per_step']}x{set_['group_size']}"
        srows.append([names[s], batch, str(m["steps"]), m["step_seconds_median"], m["gen_seconds_median"],
                      m["step_seconds_first10"],
                      m["step_seconds_last10"],
                      fmt(None if m["zero_grad_step_fraction"] is None else 100 * m["zero_grad_step_fraction"], 0) + "%",
                      fmt(None if m["uniform_group_fraction_mean"] is None else 100 * m["uniform_group_fraction_mean"], 0) + "%",
                      fmt(m["completion_len_mean"], 1), fmt(m["peak_rss_train_gb"], 2), fmt(m["peak_rss_process_gb"], 2)])
    t2 = md_table(["side", "prompts x samples", "steps", "s/step median", "generation s/step median",
                   "s/step first 10", "s/step last 10",
                   "zero-grad steps", "uniform groups", "mean completion tokens", "peak RSS train (GB)",
                   "peak RSS process (GB)"], srows)
    krows = []
    for s in sides:
        evs = result["sides"][s]["evals"]
        for e in (evs[0], evs[-1]) if evs else ():
            by = e.get("by_kind", {})
            krows.append([f"{names[s]} {e['minutes']:g} min"] + [fmt(by[k]["lenient"], 3) if k in by else "–" for k in KINDS])
    ns = next((e["by_kind"] for s in sides for e in result["sides"][s]["evals"] if "by_kind" in e), {})
    t3 = md_table(["lenient accuracy by kind"] + [f"{k} (n={ns[k]['n']})" if k in ns else k for k in KINDS], krows)
    n_eval = next((int(e["n"]) for s in sides for e in result["sides"][s]["evals"]), 0)
    lines = [
        f"### learn_arithmetic: held-out accuracy vs training time ({n_eval} held-out chain_sum problems, greedy, "
        f"{result['settings']['eval_tokens']} tokens)",
        "",
        t1,
        "",
        t2,
        "",
        t3,
        "",
        f"Machine: {machine_line(result['machine'])}.",
        f"Command: `{result['command']}`",
        "strict: right answer inside <answer> tags; lenient: right when the last number is read; "
        "format: exactly one answer tag pair. Training time excludes evaluation. "
        "Zero-grad steps: every group of the step scored alike; uniform groups: mean share of groups whose "
        "samples all scored alike. Peak RSS train: sampled every 0.1 s outside evaluation"
        + (f" (TRL's includes its idle evaluation engine, {fmt(result['sides']['trl'].get('eval_engine_weights_mb'), 0)} MB)"
           if "trl" in sides else "")
        + "; process: the kernel's ru_maxrss of the side's process.",
    ]
    return "\n".join(lines)


def main() -> None:
    args = parse_args()
    if args._worker:
        worker(args)
        return
    out = Path(args.out)
    sides = [args.only] if args.only else [s.strip() for s in args.sides.split(",")] if args.sides else list(SIDES)
    unknown = [s for s in sides if s not in SIDES]
    if unknown:
        raise SystemExit(f"unknown side(s) {unknown}; choose from {list(SIDES)}")
    result: dict[str, Any] = {
        "benchmark": "learn_arithmetic",
        "command": command_line(),
        "machine": machine_info(),
        "settings": {"minutes": args.minutes, "eval_every": args.eval_every, "eval_size": args.eval_size,
                     "eval_tokens": args.eval_tokens, "config": args.config, "overrides": practicum_overrides(args),
                     "matched": args.matched, "precision": args.precision},
        "started": time.strftime("%Y-%m-%d %H:%M:%S"),
        "sides": {},
    }
    argv = [str(Path(__file__).resolve()), *sys.argv[1:]]

    def one(s: str, cpus: set[int] | None) -> None:
        res = run_side(s, argv, out.parent / f"learn_arithmetic_{s}.part.json", cpus)
        if "steps" in res:
            res["summary"] = summarise(res)
        result["sides"][s] = res
        out.parent.mkdir(parents=True, exist_ok=True)
        write_result(out, result)  # after each side, so a crash of the next loses nothing

    if args.parallel:
        # All sides at once, each with one torch thread: they see the same machine at the same
        # time, so background load hits them alike. Each is pinned to its own core when there
        # are enough cores; otherwise the scheduler shares the cores between them.
        import threading

        ncpu = len(os.sched_getaffinity(0))
        threads = [threading.Thread(target=one, args=(s, {i} if len(sides) <= ncpu else None))
                   for i, s in enumerate(sides)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    else:
        for s in sides:
            one(s, None)
    finish(out, result, report(result))


if __name__ == "__main__":
    main()
