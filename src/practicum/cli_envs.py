"""``practicum envs``: the installed domain plugins, and sample tasks of one.

``practicum envs list [--json]`` prints one row per plugin of the ``practicum.domains``
entry-point group: its name (the ``env:`` of a config), where it comes from, task counts of its
default task set (held-out tasks, and distinct training tasks among the first ``--draws`` drawn;
a generator that gives a new task each draw shows ``N+``), its tools and its score components. A
plugin that fails to load, or that needs settings to have tasks at all (``terminal`` needs a
``source.path``), is a row saying so, never a stop.

``practicum envs show NAME [--n 3] [--set source.path=...] [--json]`` prints the plugin's options
(with defaults), then ``n`` training tasks: the prompt, the reference answer
(``metadata["reference"]``) and the score the plugin's verifier gives it. ``--set`` takes dotted
fields of a domain section (``options.dataset=leg_counting``, ``source.path=tasks/terminal``).
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from practicum.errors import PracticumError, RolloutFailure

envs_app = typer.Typer(no_args_is_help=True, help="List the installed domains and show their tasks.")
console = Console(highlight=False)


@dataclass
class EnvRow:
    """One row of ``practicum envs list``."""

    name: str
    origin: str  # the plugin object and the distribution it comes from
    about: str
    held_out: int | None  # held-out tasks of the default task set; None when there is none
    training: str | None  # distinct training tasks among the draws ("N+": every draw was new)
    tools: list[str]
    components: list[str]
    problem: str | None = None  # why the counts are missing: a load failure, or the settings it needs


def _section(name: str, overrides: list[str], source: str = "--set") -> Any:
    from pydantic import ValidationError

    from practicum.config import DomainSection, _set_dotted, parse_overrides
    from practicum.errors import ConfigError

    raw: dict[str, Any] = {"name": name, "env": name}
    for k, v in parse_overrides(overrides, source):
        _set_dotted(raw, k, v, source)
    try:
        return DomainSection.model_validate(raw)
    except ValidationError as e:
        raise ConfigError(f"{source}: " + "; ".join(f"{'.'.join(map(str, err['loc']))}: {err['msg']}"
                                                    for err in e.errors())) from None


def _build(name: str, overrides: list[str]) -> Any:
    from practicum.domains import build_domain

    return build_domain(_section(name, overrides), seed=0, base_dir=Path.cwd())


def _close(domain: Any) -> None:
    asyncio.run(domain.close())


def list_rows(draws: int = 100) -> list[EnvRow]:
    """The rows of ``practicum envs list``."""
    from practicum.domains import get_plugin, plugin_names, plugin_origin

    rows = []
    for name in plugin_names():
        origin = plugin_origin(name)
        try:
            plugin = get_plugin(name)
        except PracticumError as e:
            rows.append(EnvRow(name, origin, "", None, None, [], [], f"fails to load: {e}"))
            continue
        row = EnvRow(name, origin, plugin.about, None, None, list(plugin.tools), list(plugin.components))
        try:
            domain = _build(name, [])
        except PracticumError as e:
            row.problem = f"no default tasks: {str(e).split('): ', 1)[-1]}"
            rows.append(row)
            continue
        try:
            row.held_out = len(domain.source.eval_tasks())
            ids = {domain.source.train_task(i).id for i in range(draws)}
            row.training = f"{len(ids)}+" if len(ids) == draws else str(len(ids))
        except PracticumError as e:
            row.problem = f"no default tasks: {e}"
        finally:
            _close(domain)
        rows.append(row)
    return rows


@envs_app.command("list")
def envs_list(
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON list of objects.")] = False,
    draws: Annotated[int, typer.Option("--draws", min=1, help="Training tasks drawn to count the distinct ones.")] = 100,
) -> None:
    """List the installed domains: name, source, task counts, tools, components."""
    rows = list_rows(draws)
    if as_json:
        typer.echo(json.dumps([asdict(r) for r in rows]))
        return
    table = Table(title="installed domains (entry-point group practicum.domains)")
    for col in ("name", "from", "held-out", f"training (in {draws} draws)", "tools", "components"):
        table.add_column(col)
    for r in rows:
        table.add_row(r.name, escape(r.origin.split(" (", 1)[-1].rstrip(")")), "-" if r.held_out is None else str(r.held_out),
                      escape(r.training or "-"), ", ".join(r.tools) or "-", ", ".join(r.components))
    console.print(table)
    for r in rows:
        console.print(f"[bold]{r.name}[/]: {escape(r.about)}" + (f" [yellow]({escape(r.problem)})[/]" if r.problem else ""),
                      soft_wrap=True)
    console.print("counts are of each domain's default task set; `practicum envs show NAME` shows its tasks and options")


@envs_app.command("show")
def envs_show(
    name: Annotated[str, typer.Argument(help="A domain name (`practicum envs list`).")],
    n: Annotated[int, typer.Option("--n", min=1, help="How many sample tasks.")] = 3,
    set_: Annotated[list[str] | None, typer.Option("--set", help="A field of the domain section, e.g. options.dataset=leg_counting or source.path=tasks/terminal (repeatable).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Show a domain's options and sample tasks, each with its reference answer and that answer's score."""
    from practicum.config import describe
    from practicum.domains import default_context, get_plugin, plugin_origin

    try:
        plugin = get_plugin(name)
        domain = _build(name, set_ or [])
    except PracticumError as e:
        console.print(f"[bold red]error:[/] {escape(str(e))}", soft_wrap=True)
        raise typer.Exit(2) from None
    ctx = default_context()
    samples = []

    async def score_all() -> None:
        try:
            for i in range(n):
                task = domain.source.train_task(i)
                reference = task.metadata.get("reference")
                record: dict[str, Any] = {"id": task.id, "prompt": task.prompt[-1].content, "reference": reference}
                if reference is not None:
                    try:
                        record["verdict"] = (await plugin.verify(task, str(reference), ctx)).to_json()
                    except RolloutFailure as e:
                        record["verdict"] = {"error": str(e)}
                samples.append(record)
        finally:
            await domain.close()

    try:
        asyncio.run(score_all())
    except PracticumError as e:
        console.print(f"[bold red]error:[/] {escape(str(e))}", soft_wrap=True)
        raise typer.Exit(2) from None
    options = describe(plugin.options_model)
    if as_json:
        typer.echo(json.dumps({"name": name, "origin": plugin_origin(name), "about": plugin.about,
                               "components": list(plugin.components), "tools": list(plugin.tools),
                               "options": options, "tasks": samples}))
        return
    console.print(f"[bold]{name}[/] — {escape(plugin.about)}\nfrom {escape(plugin_origin(name))}")
    console.print(f"components: {', '.join(plugin.components)}; tools: {', '.join(plugin.tools) or 'none (single turn)'}")
    console.print("options (a domain section's source: and options:):")
    for line in options:
        console.print(f"  {escape(line)}", soft_wrap=True)
    for s in samples:
        console.rule(f"[bold]{escape(s['id'])}[/]")
        console.print(escape(_cut(s["prompt"], 800)), soft_wrap=True)
        if s["reference"] is None:
            console.print("[yellow]no reference answer[/]")
            continue
        console.print(f"[bold]reference:[/] {escape(_cut(str(s['reference']), 400))}", soft_wrap=True)
        v = s["verdict"]
        if "error" in v:
            console.print(f"[red]verifier failed:[/] {escape(v['error'])}")
        else:
            comps = ", ".join(f"{k} {val:g}" for k, val in v["components"].items() if not k.startswith("test:"))
            console.print(f"[bold]score {v['value']:.3f}[/] ({comps}) — {escape(_cut(v['explanation'], 300))}"
                          + (f"; flags: {', '.join(v['flags'])}" if v["flags"] else ""), soft_wrap=True)


def _cut(text: str, limit: int) -> str:
    """The head and the tail of a long text (a long document's question comes at its end)."""
    if len(text) <= limit:
        return text
    head, tail = limit * 5 // 8, limit * 3 // 8
    return text[:head] + f" ... [{len(text) - head - tail} characters] ... " + text[-tail:]
