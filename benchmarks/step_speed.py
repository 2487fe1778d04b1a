"""Step speed: one Practicum GRPO step against one TRL GRPOTrainer step, same work.

Same model (the embedded SmolLM2-135M-Instruct, full fine-tune), same prompts (the chain_sum
task stream of benchmarks/learn_arithmetic.yaml: step s takes tasks s*P .. s*P+P-1 on both
sides), same group size, completion cap and batch (default 4 prompts x 8 samples, 64 tokens,
temperature 1.0). Each side runs in its own subprocess, one after the other: warm-up steps,
then N timed steps.

Sides: ``practicum`` (its defaults: bf16 engine, bf16-autocast trainer), ``trl-fp32`` and
``trl-bf16`` (GRPOTrainer at its fastest CPU settings: no gradient checkpointing, no vLLM,
bf16=False or True; beta 0, so no reference model).

Completion lengths differ between sides (sampling), so besides seconds per step the report
gives seconds per generated token and per trained token and the mean completion length.
Trained tokens: completion tokens that go through the backward pass. TRL trains every sample;
Practicum drops samples whose advantage is zero (groups that all scored alike) before the
forward pass, since they contribute nothing to the gradient without a KL term -- the report
shows how many samples each side trained.

    python benchmarks/step_speed.py                      # all three sides, 1 warm-up + 5 steps
    python benchmarks/step_speed.py --sides practicum --steps 1
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path
from typing import Any

from common import (
    RssSampler,
    build_single_domain,
    command_line,
    completion_text,
    current_rss_mb,
    finish,
    fmt,
    load_cfg,
    log,
    machine_info,
    machine_line,
    md_table,
    median,
    messages_as_dicts,
    peak_rss_mb,
    practicum_run,
    run_side,
    score_texts,
    timed_grpo_trainer_class,
    write_result,
)

SIDES = ("practicum", "trl-fp32", "trl-bf16")
NAMES = {"practicum": "Practicum (bf16 engine + bf16 autocast)", "trl-fp32": "TRL GRPOTrainer fp32",
         "trl-bf16": "TRL GRPOTrainer bf16=True"}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--prompts", type=int, default=4, help="prompts per step")
    p.add_argument("--group", type=int, default=8, help="samples per prompt")
    p.add_argument("--max-tokens", type=int, default=64, help="completion cap (TRL's max_completion_length)")
    p.add_argument("--temperature", type=float, default=1.0, help="sampling temperature (TRL's default 1.0)")
    p.add_argument("--lr", type=float, default=1e-5)
    p.add_argument("--warmup", type=int, default=1, help="untimed steps first")
    p.add_argument("--steps", type=int, default=5, help="timed steps")
    p.add_argument("--sides", default=",".join(SIDES), help=f"comma-separated, from {', '.join(SIDES)}")
    p.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    p.add_argument("--config", default=str(Path(__file__).with_name("learn_arithmetic.yaml")),
                   help="config whose model and domain both sides use (Practicum also takes its trainer section)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a field of Practicum's config (repeatable)")
    p.add_argument("--out", default="benchmarks/out/step_speed.json")
    p.add_argument("--_worker", choices=SIDES, help=argparse.SUPPRESS)
    p.add_argument("--_result", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    args.side_list = [s.strip() for s in args.sides.split(",") if s.strip()]
    bad = [s for s in args.side_list if s not in SIDES]
    if bad:
        p.error(f"unknown sides {bad}; choose from {', '.join(SIDES)}")
    return args


def overrides(args: argparse.Namespace) -> list[str]:
    return [
        *args.overrides,
        f"run.dir={Path(args.out).resolve().parent / 'step_speed_practicum_run'}",
        f"rollout.prompts_per_step={args.prompts}",
        f"rollout.group_size={args.group}",
        f"rollout.max_new_tokens={args.max_tokens}",
        f"rollout.temperature={args.temperature}",
        "rollout.top_p=1.0",
        f"trainer.lr={args.lr}",
        "eval.before=false",
        "eval.after=false",
    ]


# --- sides ----------------------------------------------------------------------------------------
async def practicum_main(args: argparse.Namespace, sampler: RssSampler) -> dict[str, Any]:
    run = practicum_run(args.config, overrides(args), args.threads)
    cfg = run.cfg
    steps = []
    sampler.phase = "train"
    await run.start()  # the orchestrator: max_staleness 0 (the config's), so each step's rollouts start after the previous update
    try:
        for step in range(1, args.warmup + args.steps + 1):
            t0 = time.perf_counter()
            m = await run.train_step(step)
            dt = time.perf_counter() - t0
            steps.append({
                "step": step,
                "warmup": step <= args.warmup,
                "step_seconds": dt,
                "gen_seconds": m["wait_seconds"],
                "update_seconds": dt - m["wait_seconds"],  # everything but the rollout, as on TRL's side
                "trainer_update_seconds": m.get("train_seconds"),
                "gen_tokens": m["gen_tokens"],
                "completion_len": m["completion_len"],
                "samples": m["samples"],
                "samples_trained": m["samples_trained"],
                "tokens_trained": m.get("tokens_trained", 0.0),
                "uniform_groups": m["uniform_groups"],
                "rss_mb": current_rss_mb(),
            })
            log(run.summary(step, m) + (" (warm-up)" if step <= args.warmup else ""))
    finally:
        await run.aclose()
    return {"settings": {"engine_dtype": cfg.model.engine_dtype, "autocast_dtype": cfg.trainer.autocast_dtype,
                         "micro_batch_tokens": cfg.trainer.micro_batch_tokens,
                         "gradient_checkpointing": cfg.trainer.gradient_checkpointing, "mode": cfg.trainer.mode},
            "steps": steps}


def trl_main(args: argparse.Namespace, sampler: RssSampler, bf16: bool) -> dict[str, Any]:
    import torch
    from datasets import Dataset
    from transformers import TrainerCallback
    from trl import GRPOConfig

    from practicum.models import resolve_model

    cfg = load_cfg(args.config, overrides(args))
    if args.threads:
        torch.set_num_threads(args.threads)
    domain = build_single_domain(cfg)
    model_path = resolve_model(cfg.model.name)
    n_steps = args.warmup + args.steps
    P, G = args.prompts, args.group
    # Practicum's task stream: step s (from 1) takes train_task(s*P .. s*P+P-1)
    tasks = {i: domain.source.train_task(i) for i in range(P, P + n_steps * P)}
    dataset = Dataset.from_list([{"prompt": messages_as_dicts(t), "task_index": i} for i, t in tasks.items()])

    def arithmetic_reward(prompts, completions, task_index, **kwargs):
        return [s.value for s in score_texts(domain, [tasks[i] for i in task_index],
                                             [completion_text(c) for c in completions])]

    targs = GRPOConfig(
        output_dir=str(Path(args.out).resolve().parent / "step_speed_trl_run"),
        per_device_train_batch_size=P * G,
        num_generations=G,
        gradient_accumulation_steps=1,
        max_completion_length=args.max_tokens,
        learning_rate=args.lr,
        lr_scheduler_type="constant",
        temperature=args.temperature,
        beta=0.0,
        bf16=bf16,
        use_cpu=True,
        use_vllm=False,
        gradient_checkpointing=False,
        shuffle_dataset=False,
        logging_steps=1,
        report_to="none",
        save_strategy="no",
        max_steps=n_steps,
        seed=cfg.run.seed,
        dataloader_num_workers=0,
        disable_tqdm=True,
    )
    steps: list[dict[str, Any]] = []
    step_logs: dict[int, dict[str, Any]] = {}

    class Clock(TrainerCallback):
        last = 0.0

        def on_train_begin(self, args_, state, control, **kw):
            self.last = time.perf_counter()

        def on_step_end(self, args_, state, control, **kw):
            now = time.perf_counter()
            steps.append({"step": state.global_step, "warmup": state.global_step <= args.warmup,
                          "step_seconds": now - self.last, "rss_mb": current_rss_mb()})
            self.last = now

        def on_log(self, args_, state, control, logs=None, **kw):
            if logs:
                step_logs.setdefault(state.global_step, {}).update(logs)

    trainer = timed_grpo_trainer_class()(
        model=str(model_path), reward_funcs=arithmetic_reward, args=targs, train_dataset=dataset, callbacks=[Clock()],
    )
    sampler.phase = "train"
    trainer.train()
    gen_seconds = getattr(trainer, "gen_seconds", [])
    for i, s in enumerate(steps):
        lg = step_logs.get(s["step"], {})
        mean_len = lg.get("completions/mean_length")
        gen_tokens = None if mean_len is None else mean_len * P * G
        gen_s = gen_seconds[i] if i < len(gen_seconds) else None
        s.update({
            "gen_seconds": gen_s,
            "update_seconds": None if gen_s is None else s["step_seconds"] - gen_s,  # everything but generation
            "gen_tokens": gen_tokens,
            "completion_len": mean_len,
            "samples": float(P * G),
            "samples_trained": float(P * G),  # TRL runs forward/backward on every sample
            "tokens_trained": gen_tokens,
            "uniform_groups": lg.get("frac_reward_zero_std"),
            "trl_step_time": lg.get("step_time"),
            "log": lg,
        })
        log(f"step {s['step']}{' (warm-up)' if s['warmup'] else ''}: {s['step_seconds']:.1f} s, "
            f"generation {fmt(gen_s, 1)} s, completion length {fmt(mean_len, 1)}")
    return {"settings": {"bf16": bf16, "gradient_checkpointing": False, "loss_type": targs.loss_type,
                         "model_dtype": "float32"},
            "steps": steps}


def worker(args: argparse.Namespace) -> None:
    with RssSampler() as sampler:
        if args._worker == "practicum":
            res = asyncio.run(practicum_main(args, sampler))
        else:
            res = trl_main(args, sampler, bf16=args._worker == "trl-bf16")
    res["peak_rss_mb_by_phase"] = dict(sampler.peaks)
    res["peak_rss_mb_self"] = peak_rss_mb()
    res["machine"] = machine_info()
    write_result(args._result, res)


# --- report --------------------------------------------------------------------------------------
def summarise(side: dict[str, Any]) -> dict[str, Any]:
    timed = [s for s in side.get("steps", []) if not s["warmup"]]

    def total(k: str) -> float | None:
        vals = [s.get(k) for s in timed]
        return None if not vals or any(v is None for v in vals) else float(sum(vals))

    t, gen_t, upd_t = total("step_seconds"), total("gen_seconds"), total("update_seconds")
    gen_tok, tr_tok = total("gen_tokens"), total("tokens_trained")
    n = len(timed)
    return {
        "timed_steps": n,
        "step_seconds_median": median([s["step_seconds"] for s in timed]),
        "gen_seconds_median": median([s.get("gen_seconds") for s in timed]),
        "update_seconds_median": median([s.get("update_seconds") for s in timed]),
        "completion_len_mean": (gen_tok / (total("samples") or 1)) if gen_tok is not None else None,
        "gen_tokens_per_step": gen_tok / n if gen_tok is not None and n else None,
        "seconds_per_gen_token": t / gen_tok if t and gen_tok else None,
        "gen_tokens_per_second_in_generation": gen_tok / gen_t if gen_tok and gen_t else None,
        "tokens_trained_per_step": tr_tok / n if tr_tok is not None and n else None,
        "seconds_per_trained_token": t / tr_tok if t and tr_tok else None,
        "update_seconds_per_trained_token": upd_t / tr_tok if upd_t and tr_tok else None,
        "samples_trained_per_step": (total("samples_trained") or 0) / n if n else None,
        "samples_per_step": (total("samples") or 0) / n if n else None,
        "peak_rss_gb": (side.get("process_peak_rss_mb") or 0) / 1024 or None,
    }


def ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a and b else None


def report(result: dict[str, Any]) -> str:
    sides = [s for s in SIDES if s in result["sides"] and "summary" in result["sides"][s]]
    rows = []
    for s in sides:
        m = result["sides"][s]["summary"]
        rows.append([NAMES[s], m["step_seconds_median"], m["gen_seconds_median"], m["update_seconds_median"],
                     fmt(m["completion_len_mean"], 1), fmt(m["gen_tokens_per_second_in_generation"], 0),
                     fmt(m["seconds_per_gen_token"], 4),
                     f"{fmt(m['samples_trained_per_step'], 1)}/{fmt(m['samples_per_step'], 0)}",
                     fmt(m["seconds_per_trained_token"], 4), fmt(m["update_seconds_per_trained_token"], 4),
                     fmt(m["peak_rss_gb"], 2)])
    st = result["settings"]
    lines = [
        f"### step_speed: one GRPO step, {st['prompts']} prompts x {st['group']} samples, "
        f"<= {st['max_tokens']} new tokens, T={st['temperature']} ({st['steps']} timed steps after {st['warmup']} warm-up)",
        "",
        md_table(["side", "s/step (median)", "generation s/step", "rest of step s", "mean completion tokens",
                  "generation tok/s", "s per generated token", "samples trained/step", "s per trained token",
                  "update s per trained token", "peak RSS (GB)"], rows),
    ]
    if "practicum" in sides:
        p = result["sides"]["practicum"]["summary"]
        rrows = []
        for s in sides:
            if s == "practicum":
                continue
            m = result["sides"][s]["summary"]
            rrows.append([NAMES[s], ratio(m["step_seconds_median"], p["step_seconds_median"]),
                          ratio(m["gen_seconds_median"], p["gen_seconds_median"]),
                          ratio(m["seconds_per_gen_token"], p["seconds_per_gen_token"]),
                          ratio(m["update_seconds_per_trained_token"], p["update_seconds_per_trained_token"]),
                          ratio(m["peak_rss_gb"], p["peak_rss_gb"])])
        if rrows:
            lines += ["", "Ratios TRL / Practicum (above 1: Practicum is faster or smaller):", "",
                      md_table(["TRL side", "s/step", "generation s/step", "s per generated token",
                                "rest-of-step s per trained token", "peak RSS"], rrows)]
    lines += [
        "",
        f"Machine: {machine_line(result['machine'])}.",
        f"Command: `{result['command']}`",
        "Generation s/step: TRL's `_generate` (render, model.generate, decode); Practicum's rollout (render, "
        "generate, score). Rest of step: everything else (TRL: reward, advantages, forward/backward, optimiser; "
        "Practicum: store, advantages, update, weight publication to the engine). Trained tokens: completion tokens "
        "through forward/backward (Practicum skips zero-advantage samples, so its s/step also depends on how many "
        "groups scored alike; see samples trained/step). s per trained token: whole step / trained tokens; update s "
        "per trained token: rest of step / trained tokens. Peak RSS: the kernel's ru_maxrss of the side's process.",
    ]
    return "\n".join(lines)


def main() -> None:
    args = parse_args()
    if args._worker:
        worker(args)
        return
    out = Path(args.out)
    result: dict[str, Any] = {
        "benchmark": "step_speed",
        "command": command_line(),
        "machine": machine_info(),
        "settings": {"prompts": args.prompts, "group": args.group, "max_tokens": args.max_tokens,
                     "temperature": args.temperature, "lr": args.lr, "warmup": args.warmup, "steps": args.steps,
                     "config": args.config, "overrides": overrides(args)},
        "started": time.strftime("%Y-%m-%d %H:%M:%S"),
        "sides": {},
    }
    argv = [str(Path(__file__).resolve()), *sys.argv[1:]]
    for s in args.side_list:
        res = run_side(s, argv, out.parent / f"step_speed_{s}.part.json")
        if "steps" in res:
            res["summary"] = summarise(res)
        result["sides"][s] = res
        out.parent.mkdir(parents=True, exist_ok=True)
        write_result(out, result)
    finish(out, result, report(result))


if __name__ == "__main__":
    main()
