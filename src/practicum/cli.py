"""The ``practicum`` command line: train, eval, models, doctor."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from practicum.errors import PracticumError

app = typer.Typer(add_completion=False, no_args_is_help=True, help="Post-train language models with RL in verifiable environments.")
models_app = typer.Typer(no_args_is_help=True, help="List and prepare models.")
app.add_typer(models_app, name="models")
tasks_app = typer.Typer(no_args_is_help=True, help="Check task folders.")
app.add_typer(tasks_app, name="tasks")


def _register_subapps() -> None:
    from practicum.cli_sandbox import sandbox_app
    from practicum.cli_verify import verify_app

    app.add_typer(sandbox_app, name="sandbox")
    app.add_typer(verify_app, name="verify")
console = Console(highlight=False)


def _fail(e: Exception) -> None:
    console.print(f"[bold red]error:[/] {escape(str(e))}", soft_wrap=True)  # one line: scripts can grep it
    raise typer.Exit(2)


@app.command()
def train(
    config: Annotated[Path | None, typer.Argument(help="Run config (YAML).")] = None,
    set_: Annotated[list[str] | None, typer.Option("--set", help="Override a field: section.field=value (repeatable).")] = None,
    resume: Annotated[bool, typer.Option(help="Continue the run in run.dir from its latest checkpoint.")] = False,
    overwrite: Annotated[bool, typer.Option(help="Delete an existing run in run.dir and start again.")] = False,
    help_config: Annotated[bool, typer.Option("--help-config", help="List every config field and exit.")] = False,
) -> None:
    """Train a policy with GRPO on the domains of CONFIG."""
    from practicum.config import describe, load_config

    if help_config:
        for line in describe():
            console.print(line)
        return
    if config is None:
        _fail(ValueError("give a config file, e.g. `practicum train examples/quickstart.yaml`"))
    try:
        cfg = load_config(config, set_ or [])  # type: ignore[arg-type]
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

        from practicum.loop import train as run_train

        with Progress(TextColumn("[bold]{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
                      TimeElapsedColumn(), console=console, transient=True) as progress:
            bar = progress.add_task(cfg.run.name, total=cfg.run.steps)

            def on_step(step: int, total: int) -> None:
                progress.update(bar, completed=step)

            result = run_train(cfg, resume=resume, overwrite=overwrite, log=console.print, progress=on_step)
    except PracticumError as e:
        _fail(e)
        return
    if result.before and result.after:
        for dom, after in result.after.per_domain.items():
            b = result.before.per_domain[dom]
            console.print(
                f"[bold]{dom}[/]: held-out accuracy {b['lenient']:.3f} -> {after['lenient']:.3f} (lenient), "
                f"{b['strict']:.3f} -> {after['strict']:.3f} (strict, in the requested format)"
                if "lenient" in after else f"[bold]{dom}[/]: reward {b['reward']:.3f} -> {after['reward']:.3f}"
            )
    console.print(f"run folder: {result.run_dir} (store.sqlite, metrics.jsonl, tensorboard/, checkpoints/)")


@app.command("eval")
def eval_(
    config: Annotated[Path, typer.Argument(help="Config naming the domains (and their held-out sets) to evaluate on.")],
    model: Annotated[str | None, typer.Option(help="Model name or checkpoint folder (default: the config's model).")] = None,
    checkpoint: Annotated[Path | None, typer.Option(help="A training checkpoint folder (runs/X/checkpoints/step_N).")] = None,
    limit: Annotated[int | None, typer.Option(help="Evaluate at most N tasks per domain.")] = None,
    set_: Annotated[list[str] | None, typer.Option("--set", help="Override a config field.")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
    per_task: Annotated[bool, typer.Option("--per-task", help="Also print one row per task: success, turns, tool calls and tool-call errors.")] = False,
) -> None:
    """Evaluate a model or checkpoint on held-out tasks: accuracy per domain (greedy)."""
    from practicum.config import load_config

    try:
        cfg = load_config(config, set_ or [])
        import torch

        from practicum.domains import build_domain
        from practicum.engines.hf import HFEngine
        from practicum.loop import evaluate, load_checkpoint_weights
        from practicum.models import resolve_model

        domains = [build_domain(d, cfg.run.seed, cfg.base_dir) for d in cfg.domains]
        weights = None
        if checkpoint is not None:
            path, weights = load_checkpoint_weights(checkpoint)
        else:
            path = resolve_model(model or cfg.model.name)
        engine = HFEngine(path, dtype=getattr(torch, cfg.model.engine_dtype), device=cfg.model.device, max_batch=cfg.model.max_batch)
        if weights is not None:
            engine.load_weights(weights, 1)
        res = asyncio.run(evaluate(engine, domains, cfg.eval.max_new_tokens, cfg.rollout.max_turns, limit=limit,
                                   max_tokens=cfg.rollout.max_episode_tokens, max_seconds=cfg.rollout.max_episode_seconds))
    except PracticumError as e:
        _fail(e)
        return
    if json_out:
        print(json.dumps({"model": str(checkpoint or path), "per_domain": res.per_domain, "seconds": res.seconds,
                          "per_task": res.per_task}))
        return
    if per_task:
        rows = Table(title="per task")
        for col in ("task", "reward", "turns", "tool calls", "tool errors", "end"):
            rows.add_column(col)
        for r in res.per_task:
            rows.add_row(r["task"], f"{r['reward']:.2f}", str(r["turns"]), str(r["tool_calls"]), str(r["tool_errors"]), r["end"])
        console.print(rows)
    table = Table(title=f"held-out evaluation of {checkpoint or path}")
    keys = sorted({k for m in res.per_domain.values() for k in m if k != "n"})
    table.add_column("domain")
    table.add_column("n", justify="right")
    for k in keys:
        table.add_column(k, justify="right")
    for dom, m in res.per_domain.items():
        table.add_row(dom, str(int(m["n"])), *[f"{m.get(k, float('nan')):.3f}" for k in keys])
    console.print(table)
    console.print(f"{res.seconds:.1f} s")


@models_app.command("list")
def models_list() -> None:
    """List the built-in models and whether they are prepared."""
    from practicum.models import list_models

    table = Table()
    for col in ("name", "about", "source installed", "prepared", "cache"):
        table.add_column(col)
    for m in list_models():
        table.add_row(m.name, m.about, "yes" if m.available else f"no: {m.problem}", "yes" if m.prepared else "no", str(m.path))
    console.print(table)


@models_app.command("prepare")
def models_prepare(name: Annotated[str, typer.Argument(help="Built-in model name.")] = "smollm2-135m-instruct") -> None:
    """Convert a built-in model once into a cached transformers checkpoint."""
    from practicum.models import resolve_model

    t0 = time.perf_counter()
    try:
        path = resolve_model(name)
    except PracticumError as e:
        _fail(e)
        return
    console.print(f"{name}: ready at {path} ({time.perf_counter() - t0:.1f} s)")


@app.command()
def doctor() -> None:
    """Report what is installed and usable."""
    table = Table(title="practicum doctor")
    table.add_column("component")
    table.add_column("status")
    table.add_column("detail")

    def row(name: str, ok: bool | None, detail: str) -> None:
        table.add_row(name, {True: "[green]ok[/]", False: "[red]missing[/]", None: "[yellow]optional[/]"}[ok], detail)

    row("python", sys.version_info >= (3, 11), platform.python_version())
    for mod, required in [("torch", True), ("transformers", True), ("peft", True), ("gguf", True),
                          ("reasoning_gym", True), ("math_verify", True), ("tensorboard", True),
                          ("trl", None), ("vllm", None), ("ray", None)]:
        spec = importlib.util.find_spec(mod)
        if spec is None:
            row(mod, False if required else None, "not installed")
            continue
        try:
            from importlib.metadata import version

            v = version(mod.replace("_", "-"))
        except Exception:  # noqa: BLE001 - a version lookup failing is only cosmetic here
            v = "installed"
        row(mod, True, v)
    try:
        import torch

        dev = "cuda available" if torch.cuda.is_available() else "cpu only"
        row("torch device", True, f"{dev}; {torch.get_num_threads()} threads; bf16 {'yes' if torch.backends.mkldnn.is_available() else 'unknown'}")
    except ImportError:
        pass
    from practicum.models import list_models, practicum_home

    row("PRACTICUM_HOME", True, str(practicum_home()))
    for m in list_models():
        row(f"model {m.name}", m.available, ("prepared" if m.prepared else "not prepared: `practicum models prepare`")
            if m.available else (m.problem or ""))
    row("cpu cores", True, str(os.cpu_count()))
    from practicum.sandbox import report

    for name, works, why in report():
        row(f"sandbox {name}", works, why)
    console.print(table)


@tasks_app.command("check")
def tasks_check(
    path: Annotated[Path, typer.Argument(help="A task folder, or a folder of task folders.")],
    run_solutions: Annotated[bool, typer.Option("--run-solutions", help="Also score each reference solution and an untouched workspace in the sandbox.")] = False,
) -> None:
    """Validate terminal task folders; report every problem with its file.

    Exits non-zero when a task has an error, or (with --run-solutions) when a reference scores
    below 1 or an untouched workspace above 0."""
    from practicum.envs.terminal_tasks import check_task

    folders = [path] if (path / "task.toml").exists() or (path / "instruction.md").exists() else sorted(
        p for p in path.iterdir() if p.is_dir() and not p.name.startswith("."))
    if not folders:
        _fail(ValueError(f"{path}: no task folders"))
    bad = 0
    for folder in folders:
        problems = check_task(folder)
        errors = [p for p in problems if p.severity == "error"]
        bad += bool(errors)
        mark = "[red]error[/]" if errors else ("[yellow]warning[/]" if problems else "[green]ok[/]")
        console.print(f"{mark} {folder.name}")
        for p in problems:
            console.print(f"    {p}")
    if run_solutions:
        from practicum.envs.terminal import TerminalDomain, run_reference

        table = Table(title="reference and untouched scores")
        for col in ("task", "reference", "untouched", "verdict"):
            table.add_column(col)

        async def score_all() -> int:
            failed = 0
            for folder in folders:
                if any(p.severity == "error" for p in check_task(folder)):
                    continue
                domain = TerminalDomain("terminal", folder.parent)
                task = next(t for t in domain.source.eval_tasks() if t.id == f"terminal/{folder.name}")
                ref = (await run_reference(domain, task, True)).score
                untouched = (await run_reference(domain, task, False)).score
                ok = ref is not None and ref.value >= 1.0 and untouched is not None and untouched.value <= 0.0
                failed += not ok
                table.add_row(folder.name, "-" if ref is None else f"{ref.value:.2f}",
                              "-" if untouched is None else f"{untouched.value:.2f}",
                              "[green]ok[/]" if ok else "[red]FAIL[/]")
            return failed

        bad += asyncio.run(score_all())
        console.print(table)
    console.print(f"{len(folders)} task(s), {bad} with problems")
    if bad:
        raise typer.Exit(1)


_register_subapps()

if __name__ == "__main__":
    app()
