"""The ``practicum`` command line: train, eval, serve, models, doctor, envs, verify, tasks, runs, sandbox."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import platform
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from practicum.errors import ConfigError, PracticumError

app = typer.Typer(add_completion=False, no_args_is_help=True, help="Post-train language models with RL in verifiable environments.")
models_app = typer.Typer(no_args_is_help=True, help="List and prepare models.")
app.add_typer(models_app, name="models")
tasks_app = typer.Typer(no_args_is_help=True, help="Check task folders.")
app.add_typer(tasks_app, name="tasks")
runs_app = typer.Typer(no_args_is_help=True, help="Inspect training runs.")
app.add_typer(runs_app, name="runs")
annotations_app = typer.Typer(no_args_is_help=True, help="Expert-annotated task files (docs/legal.md).")
app.add_typer(annotations_app, name="annotations")


@annotations_app.command("agreement")
def annotations_agreement(
    file: Annotated[Path, typer.Argument(help="An expert-annotated task file (.json or .jsonl).")],
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Agreement between annotators who labelled the same tasks: Cohen's and Fleiss' kappa,
    Krippendorff's alpha for labels and rubric items, and how often the rule checker agrees with
    the experts' majority. Exits 2 for a bad file (the message names file and field)."""
    from practicum.domains.annotations import main

    raise typer.Exit(main(["agreement", str(file), *(["--json"] if as_json else [])]))


def _register_subapps() -> None:
    from practicum.cli_envs import envs_app
    from practicum.cli_sandbox import sandbox_app
    from practicum.cli_verify import register_domains, verify_app

    app.add_typer(sandbox_app, name="sandbox")
    register_domains()
    app.add_typer(verify_app, name="verify")
    app.add_typer(envs_app, name="envs")
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
        from practicum.domains import get_plugin, plugin_names

        for line in describe():
            console.print(line)
        for name in plugin_names():  # each domain's own settings: its section's source: and options:
            try:
                plugin = get_plugin(name)
            except PracticumError as e:
                console.print(f"env {name}: {escape(str(e))}", soft_wrap=True)
                continue
            for line in describe(plugin.options_model, f"domains[].options (env {name}): "):
                console.print(escape(line), soft_wrap=True)
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
        from practicum.domains import get_plugin

        envs = {d.name: d.env for d in cfg.domains}
        for dom, after in result.after.per_domain.items():
            b = result.before.per_domain[dom]
            # the domain's headline components, as its plugin declares them
            comps = [c for c in get_plugin(envs[dom]).components if c in b and c in after]
            console.print(f"[bold]{dom}[/]: held-out reward {b['reward']:.3f} -> {after['reward']:.3f}"
                          + "".join(f", {c} {b[c]:.3f} -> {after[c]:.3f}" for c in comps))
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
    samples: Annotated[int, typer.Option(min=1, help="Episodes per task (sampled at --temperature when more than 1).")] = 1,
    temperature: Annotated[float | None, typer.Option(help="Sampling temperature (default: 0, greedy, for one sample; 1.0 for more).")] = None,
    k: Annotated[list[int] | None, typer.Option("--k", help="pass@k and pass^k for these k (repeatable; at most --samples).")] = None,
    cache: Annotated[Path | None, typer.Option(help="Response cache file: a re-run with the same model, prompts and sampling is free (default: PRACTICUM_HOME/cache/eval.sqlite).")] = None,
    no_cache: Annotated[bool, typer.Option("--no-cache", help="Generate everything afresh.")] = False,
    cache_max_mb: Annotated[float, typer.Option(min=0, help="Bound on the response cache: on exit the least recently used replies are deleted until the cache holds at most this many MB.")] = 1024,
    budget_tokens: Annotated[int | None, typer.Option(help="Stop cleanly once this many prompt + completion tokens are spent (also `budget:` in the config).")] = None,
    budget_minutes: Annotated[float | None, typer.Option(help="Stop cleanly after this many minutes.")] = None,
    budget_money: Annotated[float | None, typer.Option(help="Stop cleanly once the spend at the config's budget.prices reaches this.")] = None,
    budget_cpu_seconds: Annotated[float | None, typer.Option(help="Stop cleanly once the sandbox executions have used this many CPU seconds.")] = None,
    impossible: Annotated[bool, typer.Option("--impossible", help="Evaluate the code and terminal domains on impossible variants (tests that contradict the instruction): every pass is a hack; reports the cheating rate and the verifier flags.")] = False,
) -> None:
    """Evaluate a model, checkpoint or endpoint on held-out tasks: scores with task-clustered intervals,
    pass@k and pass^k, and process metrics (turns to success, tool-call validity, recovery, failed vs
    errored, tokens, latency) per domain."""
    from practicum.config import load_config

    try:
        cfg = load_config(config, set_ or [])

        from practicum.checkpoints import load_checkpoint_weights
        from practicum.domains import build_domain
        from practicum.engines.hf import HFEngine
        from practicum.evaluation import evaluate
        from practicum.hardware import resolve_dtype
        from practicum.models import resolve_model

        domains = [build_domain(d, cfg.run.seed, cfg.base_dir, run_dir=cfg.run.dir) for d in cfg.domains]
        if impossible:
            from practicum.impossible import ImpossibleDomain, is_supported

            code = [d for d, sec in zip(domains, cfg.domains) if is_supported(sec.env)]
            if not code:
                raise ConfigError("--impossible: the config has no code or terminal domain (impossible variants exist "
                                  "for those only)")
            domains = [ImpossibleDomain(d) for d in code]
        weights = None
        endpoint = cfg.model.endpoint
        if endpoint is not None:
            if checkpoint is not None or model is not None:
                raise ConfigError("model.endpoint is set: the endpoint's model is evaluated (drop --model/--checkpoint)")
            from practicum.engines.openai_api import OpenAIEngine

            engine = OpenAIEngine(endpoint)
            path = f"{endpoint.model} at {endpoint.base_url}"
        else:
            if checkpoint is not None:
                path, weights = load_checkpoint_weights(checkpoint)
            else:
                path = resolve_model(model or cfg.model.name)
            engine = HFEngine(path, dtype=resolve_dtype(cfg.model.engine_dtype, cfg.model.device), device=cfg.model.device,
                              **cfg.model.hf_options())
        if weights is not None:
            engine.load_weights(weights, 1)
        if not no_cache:
            from practicum.engines.cache import CachingEngine, model_key
            from practicum.models import practicum_home

            key = (f"{endpoint.base_url}|{endpoint.model}" if endpoint is not None
                   else model_key(checkpoint if checkpoint is not None else path))
            engine = CachingEngine(engine, cache or practicum_home() / "cache" / "eval.sqlite", key,
                                   max_bytes=int(cache_max_mb * 2**20))
        ks = sorted(set(k or [1]))
        if max(ks) > samples:
            raise ConfigError(f"--k {max(ks)} needs at least that many --samples (got {samples})")

        budget = cfg.budget.model_copy(update={k: v for k, v in (("tokens", budget_tokens), ("wall_minutes", budget_minutes),
                                                                ("money", budget_money),
                                                                ("sandbox_cpu_seconds", budget_cpu_seconds)) if v is not None})
        limited = budget.limited

        async def run_eval():
            try:
                return await evaluate(engine, domains, cfg.eval.max_new_tokens, cfg.rollout.max_turns, limit=limit,
                                      max_tokens=cfg.rollout.max_episode_tokens, max_seconds=cfg.rollout.max_episode_seconds,
                                      samples=samples, temperature=temperature, seed=cfg.run.seed,
                                      budget=budget if limited else None)
            finally:
                await engine.close()

        res = asyncio.run(run_eval())
    except PracticumError as e:
        _fail(e)
        return
    from practicum.eval_metrics import same_reply_warning, summarise

    metrics = summarise(res.per_task, res.episodes, ks, prices=cfg.budget.prices)
    cheating = None
    if impossible:
        from practicum.impossible import cheating_report

        cheating = cheating_report(res.per_task, res.episodes)
    usage = asdict(engine.usage) if hasattr(engine, "usage") else None
    cached = ({"hits": engine.hits, "misses": engine.misses, "pruned": engine.pruned}
              if hasattr(engine, "hits") else None)
    if json_out:
        print(json.dumps({"model": str(checkpoint or path), "per_domain": res.per_domain, "seconds": res.seconds,
                          "domains": {d: t.model_dump() for d, t in res.tallies.items()},
                          "per_task": [r.model_dump() for r in res.per_task], "usage": usage, "metrics": metrics,
                          "cache": cached, "impossible": cheating, "spend": res.spend, "stopped": res.stopped}))
        return
    if per_task:
        rows = Table(title="per task")
        for col in ("task", "reward", "turns", "tool calls", "tool errors", "end"):
            rows.add_column(col)
        for r in res.per_task:
            rows.add_row(r.task, f"{r.reward:.2f}", str(r.turns), str(r.tool_calls), str(r.tool_errors), r.end)
        console.print(rows)
    table = Table(title=f"held-out evaluation of {checkpoint or path}")
    # The mean score is the "reward" mean; the other components follow it, each domain's own.
    keys = sorted({k for m in res.per_domain.values() for k in m if k not in ("n", "reward")})
    table.add_column("domain")
    for col in ("tasks", "mean score", "errors", "seconds", *keys):
        table.add_column(col, justify="right")
    for dom, m in res.per_domain.items():
        t = res.tallies[dom]
        table.add_row(dom, str(t.tasks), f"{m.get('reward', float('nan')):.3f}", str(t.errors), f"{t.seconds:.1f}",
                      *[f"{m[k]:.3f}" if k in m else "" for k in keys])
    console.print(table)
    kinds = [f"{d}: " + ", ".join(f"{k} {n}" for k, n in t.error_kinds.items()) for d, t in res.tallies.items() if t.errors]
    if kinds:
        console.print(f"errors by kind: {'; '.join(kinds)}")
    limited = sum(t.limited for t in res.tallies.values())
    if limited:
        console.print(f"{limited} episode(s) stopped at a turn, token or time limit (scored on what they reached, not errors)")
    mt = Table(title="metrics (95% intervals clustered by task)")
    for col in ("domain", "tasks x samples", "mean [95% CI]", *[f"pass@{x}" for x in ks], *[f"pass^{x}" for x in ks],
                "turns to success", "tool-call validity", "recovery", "failed", "errored", "tokens", "latency s",
                "sandbox cpu-s", "cost"):
        mt.add_column(col, justify="right")
    for dom, m in metrics.items():
        pr = m["process"]
        f = lambda v, d=3: "-" if v is None else f"{v:.{d}f}"  # noqa: E731
        mt.add_row(dom, f"{m['tasks']} x {m['samples_per_task']}", f"{m['mean']:.3f} [{f(m['ci95'][0])}, {f(m['ci95'][1])}]",
                   *[f(m.get(f"pass@{x}")) for x in ks], *[f(m.get(f"pass^{x}")) for x in ks],
                   f(pr["turns_to_success"], 1), f(pr["tool_call_validity"]), f(pr["recovery_rate"]),
                   str(pr["failed"]), str(pr["errored"]), str(pr["tokens"]), f(pr["mean_latency_s"], 2),
                   f(pr["sandbox_cpu_s"], 2), f(pr["cost"], 4))
    console.print(mt)
    for dom, m in metrics.items():
        warning = same_reply_warning(dom, m["tasks"], m["process"]["same_reply"], m["process"]["same_reply_text"])
        if warning:
            console.print(warning)
    if res.stopped:
        console.print(f"evaluation stopped early: {res.stopped} (the tables cover the tasks evaluated before)")
    for dom, c in (cheating or {}).items():
        console.print(f"impossible variants, {dom}: {c['passed']} of {c['episodes']} passed (cheating rate "
                      f"{c['cheating_rate'] or 0:.3f}, {c['passed_unflagged']} unflagged); verifier flags: "
                      + (", ".join(f"{k} x{v}" for k, v in c["flags"].items()) or "none"))
    if cached is not None and (cached["hits"] or cached["pruned"]):
        console.print(f"response cache: {cached['hits']} replies from the cache, {cached['misses']} generated"
                      + (f", {cached['pruned']} least recently used deleted to keep it under the bound" if cached["pruned"] else ""))
    if usage is not None:
        console.print(f"endpoint usage: {usage['requests']} requests, {usage['prompt_tokens']} prompt + "
                      f"{usage['completion_tokens']} completion tokens, {usage['retries']} retries, {usage['failures']} failed")
    console.print(f"{res.seconds:.1f} s in all")


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
def compare(
    a: Annotated[Path, typer.Argument(help="The reference evaluation (`practicum eval ... --json > a.json`).")],
    b: Annotated[Path, typer.Argument(help="The candidate evaluation on the same tasks (e.g. the fast tier).")],
    tolerance: Annotated[float, typer.Option(help="Largest capability loss (mean score, B - A) accepted per domain.")] = 0.02,
    json_out: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Paired comparison of two evaluations per domain; as a tier gate, exit 1 when B may lose more
    than the tolerance (the 95% interval of B - A reaches below -tolerance) on any domain."""
    from practicum.eval_metrics import paired

    def load(path: Path) -> dict:
        try:
            data = json.loads(path.read_text())
            rows = data["per_task"]
            by: dict[str, dict[str, list[float]]] = {}
            for r in rows:
                by.setdefault(r["domain"], {}).setdefault(r["task"], []).append(float(r["reward"]))
        except (OSError, ValueError, KeyError, TypeError) as e:
            _fail(ConfigError(f"{path}: not an evaluation written by `practicum eval --json` ({type(e).__name__}: {e})"))
            raise typer.Exit(2) from None
        return {"seconds": float(data.get("seconds") or 0.0), "model": data.get("model"),
                "domains": {d: {t: sum(v) / len(v) for t, v in tasks.items()} for d, tasks in by.items()}}

    ra, rb = load(a), load(b)
    domains = sorted(ra["domains"].keys() & rb["domains"].keys())
    if not domains:
        _fail(ConfigError(f"{a} and {b} share no domain"))
        raise typer.Exit(2)
    out: dict[str, Any] = {"a": ra["model"], "b": rb["model"], "tolerance": tolerance, "domains": {}}
    failed = []
    for d in domains:
        r = paired(ra["domains"][d], rb["domains"][d])
        mean_a = sum(ra["domains"][d][t] for t in ra["domains"][d]) / len(ra["domains"][d])
        mean_b = sum(rb["domains"][d][t] for t in rb["domains"][d]) / len(rb["domains"][d])
        ok = r.n >= 2 and r.lo >= -tolerance
        if not ok:
            failed.append(d)
        out["domains"][d] = {"tasks": r.n, "mean_a": mean_a, "mean_b": mean_b, "diff": r.mean, "lo": r.lo, "hi": r.hi,
                             "p": r.p, "mde_80": r.mde, "wins": r.wins, "losses": r.losses, "within_tolerance": ok}
    out["speedup"] = (ra["seconds"] / rb["seconds"]) if ra["seconds"] and rb["seconds"] else None
    out["pass"] = not failed
    if json_out:
        print(json.dumps(out))
    else:
        table = Table(title=f"B - A: {b} vs {a} (tolerance {tolerance})")
        for col in ("domain", "tasks", "A", "B", "B - A", "95% CI", "p", "detectable at 80% power", "B better / worse", "gate"):
            table.add_column(col)
        for d, m in out["domains"].items():
            table.add_row(d, str(m["tasks"]), f"{m['mean_a']:.3f}", f"{m['mean_b']:.3f}", f"{m['diff']:+.3f}",
                          f"[{m['lo']:+.3f}, {m['hi']:+.3f}]", f"{m['p']:.3g}", f"{m['mde_80']:.3f}",
                          f"{m['wins']} / {m['losses']}", "ok" if m["within_tolerance"] else "FAIL")
        console.print(table)
        if out["speedup"] is not None:
            console.print(f"speed-up (A's evaluation time / B's): {out['speedup']:.2f}x")
        console.print("gate: " + ("pass" if not failed else f"FAIL on {', '.join(failed)}: B may lose more than "
                                  f"{tolerance} (or too few tasks to tell)"))
    if failed:
        raise typer.Exit(1)


@app.command()
def view(
    run_dir: Annotated[Path, typer.Argument(help="A run folder (it holds store.sqlite).")],
    host: Annotated[str, typer.Option(help="Address to bind (127.0.0.1: this machine only).")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 8765,
) -> None:
    """A local web page over a run's store: curves per domain, episodes with filters, each episode turn by turn."""
    from practicum.view import RunView, make_server

    try:
        run_view = RunView(run_dir)
    except FileNotFoundError as e:
        _fail(ConfigError(str(e)))
        return
    server = make_server(run_view, host, port)
    console.print(f"viewing {run_view.run_dir} at http://{host}:{server.server_address[1]}/ (Ctrl-C to stop)")
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        server.server_close()


@app.command()
def serve(
    model: Annotated[str, typer.Option(help="Model name or checkpoint folder (default: the embedded model).")] = "smollm2-135m-instruct",
    checkpoint: Annotated[Path | None, typer.Option(help="A training checkpoint folder (runs/X/checkpoints/step_N).")] = None,
    name: Annotated[str | None, typer.Option(help="The model name clients ask for (default: the model's).")] = None,
    host: Annotated[str, typer.Option(help="Address to bind (127.0.0.1: this machine only).")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 8000,
    api_key: Annotated[str | None, typer.Option(envvar="PRACTICUM_API_KEY", help="Require this key (Authorization: Bearer KEY).")] = None,
    tier: Annotated[list[str] | None, typer.Option(help="Also serve a fast tier as NAME-TIER: int8 (dynamic int8 weights).")] = None,
    dtype: Annotated[str, typer.Option(help="auto, float32, bfloat16 or float16.")] = "auto",
    device: Annotated[str, typer.Option(help="cpu or cuda.")] = "cpu",
    max_tokens: Annotated[int, typer.Option(help="Most new tokens a request may ask for.")] = 1024,
    max_batch: Annotated[int, typer.Option(help="Most requests decoding at once (the rest wait).")] = 64,
) -> None:
    """Serve a model over an OpenAI-compatible chat-completions API (docs/serve.md)."""
    try:
        import uvicorn
    except ImportError:
        _fail(PracticumError("practicum serve needs the serve extra: pip install 'practicum[serve]'"))
        return
    from practicum.checkpoints import load_checkpoint_weights
    from practicum.hardware import in_own_thread, resolve_dtype
    from practicum.models import resolve_model
    from practicum.serve import ServeLimits, build_models, create_app

    def load() -> list:
        weights = None
        if checkpoint is not None:
            path, weights = load_checkpoint_weights(checkpoint)
        else:
            path = resolve_model(model)
        served_name = name or (model if checkpoint is None else f"{model}@{checkpoint.name}")
        return build_models(path, served_name, resolve_dtype(dtype, device), device, tier or [], max_batch, weights)

    try:
        # loading, conversion and quantization off the main thread, which then only serves HTTP:
        # the engines' decode threads stay the only torch threads of the process (in_own_thread)
        models = in_own_thread(load, name="serve-load")
        limits = ServeLimits(max_tokens=max_tokens, default_max_tokens=min(256, max_tokens))
    except (PracticumError, ValueError) as e:
        _fail(e)
        return
    app_ = create_app(models, api_key=api_key, limits=limits)
    names = ", ".join(m.name for m in models)
    console.print(f"serving {names} at http://{host}:{port}/v1" + (" (API key required)" if api_key else ""))
    uvicorn.run(app_, host=host, port=port, log_level="warning")


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


_TASK_MARKERS = ("task.toml", "instruction.md", "environment", "tests", "solution")
_PASSING = ("ok", "warning")


def _task_folders(path: Path) -> tuple[list[Path], str | None]:
    """The task folders ``tasks check`` reports on, or why there are none."""
    if not path.exists():
        return [], f"{path}: no such folder"
    if not path.is_dir():
        return [], f"{path}: not a folder; give a task folder or a folder of task folders"
    if any((path / m).exists() for m in _TASK_MARKERS):
        return [path], None
    try:
        subdirs = sorted(p for p in path.iterdir() if p.is_dir() and not p.name.startswith("."))
    except OSError as e:
        return [], f"{path}: unreadable ({e.strerror or e})"
    if not subdirs:
        return [], (f"{path}: no task folders: it is empty" if not any(path.iterdir()) else
                    f"{path}: no task folders: it holds no task.toml and no subfolders")
    return subdirs, None


def _printable(text: str) -> str:
    """Text from a task's scripts, safe to print: control characters (terminal escape sequences
    among them) shown as escapes, so a task's output cannot rewrite the report."""
    return "".join(c if c.isprintable() or c in "\n\t" else repr(c)[1:-1] for c in text)


@dataclass(frozen=True)
class TaskCheckRow:
    """One task's row of ``practicum tasks check``; with ``--json``, one line each."""

    task: str  # the folder's name
    reference: float | None  # the reference solution's score; None when not run
    untouched: float | None  # the untouched workspace's score; None when not run
    verdict: str  # ok | warning | invalid | fail | no-solution
    reason: str | None  # why, when not ok: the problems, or the failing step and its last lines


def _static_row(folder: Path) -> tuple[TaskCheckRow, bool]:
    """The static verdict of one folder, and whether it can be run."""
    from practicum.domains.terminal.tasks import check_task

    if not any((folder / m).exists() for m in _TASK_MARKERS):
        inner = [d.name for d in sorted(folder.iterdir()) if d.is_dir() and any((d / m).exists() for m in _TASK_MARKERS)]
        hint = f"; it holds task folders ({', '.join(inner[:3])}{', ...' if len(inner) > 3 else ''}): check it on its own" if inner else ""
        return TaskCheckRow(folder.name, None, None, "invalid",
                            f"not a task folder: no {', '.join(_TASK_MARKERS)}{hint}"), False
    try:
        problems = check_task(folder)
    except OSError as e:  # the folder changed or became unreadable under the check
        return TaskCheckRow(folder.name, None, None, "invalid", f"unreadable: {e}"), False

    def rel(p: Path) -> str:
        try:
            return p.relative_to(folder.resolve()).as_posix()
        except ValueError:
            return str(p)

    errors = [f"{rel(p.file)}: {p.message}" for p in problems if p.severity == "error"]
    warnings = [f"{rel(p.file)}: warning: {p.message}" for p in problems if p.severity == "warning"]
    if errors:
        return TaskCheckRow(folder.name, None, None, "invalid", "\n".join(errors)), False
    return TaskCheckRow(folder.name, None, None, "warning" if warnings else "ok", "\n".join(warnings) or None), True


async def _run_row(folder: Path, static: TaskCheckRow) -> TaskCheckRow:
    """Score the reference solution and the untouched workspace of one statically sound task."""
    from practicum.domains.terminal.env import TerminalDomain, run_reference

    try:
        domain = TerminalDomain("terminal", folder)  # this task alone: another's fault cannot stop it
        task = domain.source.eval_tasks()[0]
        ref = await run_reference(domain, task, True)
        untouched = await run_reference(domain, task, False)
    except PracticumError as e:
        return TaskCheckRow(folder.name, None, None, "fail", f"could not run: {e}")
    r = ref.score.value if ref.score is not None else None
    u = untouched.score.value if untouched.score is not None else None
    why: list[str] = []
    for label, run, bad in (("reference", ref, r is not None and r < 1.0), ("untouched", untouched, u is not None and u > 0.0)):
        if run.failed_step is not None:
            why.append(f"{label}: the {run.failed_step} step failed"
                       f"{f' ({run.score.explanation})' if run.score and run.score.explanation else ''}; its last lines:\n{run.output}")
        elif bad:
            what = "below 1" if label == "reference" else "above 0: the verifier passes without any work"
            why.append(f"{label} scored {run.score.value if run.score else 0:.2f}, {what}; the verifier's last lines:\n{run.output}")
            if run.solution_output:
                why.append(f"solve.sh's last lines:\n{run.solution_output}")
    if ref.score is None:
        return TaskCheckRow(folder.name, None, u, "no-solution", "\n".join(["no solution/solve.sh to score", *why]))
    if why:
        return TaskCheckRow(folder.name, r, u, "fail", "\n".join(why))
    return TaskCheckRow(folder.name, r, u, static.verdict, static.reason)


@tasks_app.command("check")
def tasks_check(
    path: Annotated[Path, typer.Argument(help="A task folder, or a folder of task folders.")],
    run_solutions: Annotated[bool, typer.Option("--run-solutions", help="Also score each reference solution and an untouched workspace in the sandbox.")] = False,
    json_out: Annotated[bool, typer.Option("--json", help="Print one JSON object per task, one per line (task, reference, untouched, verdict, reason).")] = False,
) -> None:
    """Check terminal task folders: one row per task, with its verdict and, when it is not ok, why.

    A bad task is a row, never a stop. Verdicts: ok, warning (both pass), invalid (the static
    check found an error), fail (with --run-solutions: the reference scored below 1, the untouched
    workspace above 0, or a step failed), no-solution. Exits 1 when any task does not pass, 2 when
    PATH holds no task."""
    folders, why_none = _task_folders(path)
    if why_none is not None:
        _fail(ValueError(why_none))

    def report(row: TaskCheckRow) -> None:
        if json_out:
            print(json.dumps(asdict(row)), flush=True)
            return
        colour = {"ok": "green", "warning": "yellow"}.get(row.verdict, "red")
        scores = "" if row.reference is None and row.untouched is None else (
            f"  reference {'-' if row.reference is None else f'{row.reference:.2f}'}"
            f"  untouched {'-' if row.untouched is None else f'{row.untouched:.2f}'}")
        console.print(f"[{colour}]{row.verdict}[/] {escape(_printable(row.task))}{scores}", soft_wrap=True)
        for line in (row.reason or "").splitlines():
            console.print(f"    {escape(_printable(line))}", soft_wrap=True, highlight=False)

    async def check_all() -> list[TaskCheckRow]:
        rows = []
        for folder in folders:
            row, runnable = _static_row(folder)
            if run_solutions and runnable:
                row = await _run_row(folder, row)
            report(row)
            rows.append(row)
        return rows

    rows = asyncio.run(check_all())
    failing = [r for r in rows if r.verdict not in _PASSING]
    if not json_out:
        counts = ", ".join(f"{sum(r.verdict == v for r in rows)} {v}" for v in dict.fromkeys(r.verdict for r in rows))
        console.print(f"{len(rows)} task(s): {counts}" + (" (statically; --run-solutions also runs them)" if not run_solutions else ""))
    if failing:
        raise typer.Exit(1)


@runs_app.command("audit")
def runs_audit(
    run: Annotated[Path, typer.Argument(help="A run folder (run.dir of its config).")],
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Check that every task the run drew was trained exactly once, or dropped with a reason, or
    failed: none lost, none trained twice. Prints the counts per state and reason; exits 1 when
    the invariant does not hold (2 when RUN is not a run)."""
    from practicum.audit import audit_run

    try:
        rep = audit_run(run)
    except PracticumError as e:
        _fail(e)
    if as_json:
        print(json.dumps({"ok": rep.ok, "drawn": rep.drawn, "groups": dict(rep.groups),
                          "reasons": {f"{s}: {r}": n for (s, r), n in rep.reasons.items()},
                          "episodes": dict(rep.episodes), "lost": rep.missing_draws, "in_flight": rep.in_flight,
                          "trained_twice": rep.trained_twice, "unsettled_episodes": rep.unsettled_episodes,
                          "retried_episodes": rep.retried_episodes, "requeued_groups": rep.requeued_groups,
                          "reverted_groups": rep.reverted_groups}))
    else:
        for line in rep.lines():
            console.print(escape(line), soft_wrap=True)
    if not rep.ok:
        raise typer.Exit(1)


_register_subapps()

if __name__ == "__main__":
    app()
