"""``practicum verify``: score answers with a domain's verifier, from the command line.

``practicum verify DOMAIN --task TASK_FILE --answer ANSWER_FILE [--answer ...] [--json]`` works for
every installed domain (one subcommand per plugin of the ``practicum.domains`` entry-point
group): the plugin reads the task file (its format is the domain's, docs/domains.md) and scores
the answer file's text as training would score that reply, printing the value, the components,
the explanation and the flags; ``--json`` prints one object with those four keys (a list of
them for several answers). Exit codes: 0 when every answer was scored, whatever the score; 2
for a bad task or answer file; 1 when the verifier itself failed.

``practicum verify code --task TASK.json --answer solution.py [--answer other.py ...] [--json]``
runs the code verifier (:mod:`practicum.verify.code`) in the default sandbox and prints, for
each answer in order, the score, the outcome of each hidden test and the hack patterns it
flagged. The answers are scored one after the other through one shared set of pools
(``--pool-size`` sessions each), wired exactly as training wires the code domain
(:func:`practicum.domains.code.env.code_verifier`: solutions and graders in separate pools, sessions
reset and reused between answers), so that what one answer leaves in a reused session is what
the next one could find. ``--json`` prints one JSON object with ``value``, ``components``,
``explanation``, ``flags`` (empty when none), ``cases`` and timings for a single ``--answer`` (as
before), and a JSON list of such objects, one per answer in order, for several. The exit code is
0 whenever every answer was scored (whatever the score), 2 for a bad task or answer file, and 1
when the verifier itself failed.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Annotated, Literal

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from practicum.errors import PracticumError, RolloutFailure
from practicum.verify.code import CodeTests, Verdict, VerifyConfig

verify_app = typer.Typer(no_args_is_help=True, help="Score answers with Practicum's verifiers.")
console = Console(highlight=False)


@verify_app.callback()
def _group() -> None:
    """Score answers with Practicum's verifiers."""


@verify_app.command("code")
def code(
    task: Annotated[Path, typer.Option("--task", help="A code task: task.json, a task folder, or a .jsonl file (with --id).")],
    answers: Annotated[list[Path], typer.Option("--answer", help="An answer to score: a Python file (or a reply with a ```python block). Repeat to score several in order through one shared pool.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
    task_id: Annotated[str | None, typer.Option("--id", help="Which task of a file holding several.")] = None,
    scoring: Annotated[str, typer.Option(help="fraction (of hidden tests passed) or all (1 only if all pass).")] = "fraction",
    sandbox: Annotated[str, typer.Option(help="Sandbox backend (`practicum doctor` lists them).")] = "auto",
    pool_size: Annotated[int, typer.Option("--pool-size", min=1, help="Sessions kept warm per pool (solutions, graders), as the code domain's concurrency.")] = 1,
) -> None:
    """Score each ANSWER against the hidden tests of TASK, in order, through one shared sandbox pool."""
    from practicum.domains.code.env import extract_code
    from practicum.domains.code.tasks import load_tasks

    try:
        if scoring not in ("fraction", "all"):
            raise PracticumError(f"--scoring must be 'fraction' or 'all', not {scoring!r}")
        tasks = load_tasks(task)
        if task_id is not None:
            tasks = [t for t in tasks if t.id == task_id]
            if not tasks:
                raise PracticumError(f"{task}: no task with id {task_id!r}")
        if len(tasks) != 1:
            ids = ", ".join(str(t.id) for t in tasks[:10])
            raise PracticumError(f"{task} holds {len(tasks)} tasks; choose one with --id ({ids}{', ...' if len(tasks) > 10 else ''})")
        spec = tasks[0].hidden()
        sources = []
        for answer in answers:
            try:
                text = answer.read_text()
            except (OSError, UnicodeDecodeError) as e:
                raise PracticumError(f"cannot read answer {answer}: {e}") from None
            sources.append(text if answer.suffix == ".py" else extract_code(text, spec.entry_point))
        mode: Literal["fraction", "all"] = "all" if scoring == "all" else "fraction"
        verdicts = asyncio.run(_verify(sandbox, VerifyConfig(scoring=mode), spec, sources, pool_size))
    except RolloutFailure as e:
        console.print(f"[bold red]verifier failed:[/] {escape(str(e))}", soft_wrap=True)
        raise typer.Exit(1) from None
    except PracticumError as e:
        console.print(f"[bold red]error:[/] {escape(str(e))}", soft_wrap=True)
        raise typer.Exit(2) from None
    _emit(answers, verdicts, as_json, _print)


def _emit(answers: list[Path], verdicts: list, as_json: bool, show) -> None:  # type: ignore[no-untyped-def]
    """One JSON object (a list for several answers), or each verdict under its answer's name."""
    if as_json:
        records = [v.to_json() for v in verdicts]
        typer.echo(json.dumps(records if len(records) > 1 else records[0]))
        return
    for answer, verdict in zip(answers, verdicts, strict=True):
        if len(answers) > 1:
            console.rule(f"[bold]{escape(str(answer))}[/]")
        show(verdict)


def _print_domain_verdict(v) -> None:  # type: ignore[no-untyped-def]
    comps = ", ".join(f"{k} {val:g}" for k, val in v.score.components.items())
    console.print(f"[bold]score {v.score.value:.3f}[/] ({escape(comps)}) — {escape(v.score.explanation)}", soft_wrap=True)
    console.print("flags: " + (", ".join(v.flags) if v.flags else "none"))


def register_domains() -> None:
    """One ``verify DOMAIN`` subcommand per installed domain plugin (``code`` has its own, above).
    Only the entry points' names are read here; a plugin is imported when its command runs."""
    from practicum.domains import plugin_names

    for name in plugin_names():
        if name != "code":
            verify_app.command(name, help=f"Score ANSWER files against a {name} task file (docs/domains.md).")(_domain_command(name))


def _domain_command(name: str):  # type: ignore[no-untyped-def]
    def command(
        task: Annotated[Path, typer.Option("--task", help="A task file of this domain (docs/domains.md gives its format).")],
        answers: Annotated[list[Path], typer.Option("--answer", help="A file holding the answer (the model's reply). Repeat to score several.")],
        as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object (a list for several answers).")] = False,
        sandbox: Annotated[str, typer.Option(help="Sandbox backend, for domains that run code.")] = "auto",
    ) -> None:
        from practicum.domains import default_context, get_plugin

        try:
            plugin = get_plugin(name)
            spec = plugin.load_task(task)
            texts = [_read_answer(a) for a in answers]
            ctx = default_context(sandbox=sandbox)

            async def run() -> list:
                return [await plugin.verify(spec, text, ctx) for text in texts]

            verdicts = asyncio.run(run())
        except RolloutFailure as e:
            console.print(f"[bold red]verifier failed:[/] {escape(str(e))}", soft_wrap=True)
            raise typer.Exit(1) from None
        except PracticumError as e:
            console.print(f"[bold red]error:[/] {escape(str(e))}", soft_wrap=True)
            raise typer.Exit(2) from None
        _emit(answers, verdicts, as_json, _print_domain_verdict)

    command.__doc__ = f"Score each ANSWER against the {name} task in TASK, as training would."
    return command


def _read_answer(path: Path) -> str:
    try:
        return path.read_text()
    except (OSError, UnicodeDecodeError) as e:
        raise PracticumError(f"cannot read answer {path}: {e}") from None


def _print(verdict: Verdict) -> None:
    table = Table("test", "outcome", "detail")
    for c in verdict.cases:
        colour = "green" if c.passed else "red"
        name = c.id if c.label in c.id else f"{c.id}  {c.label}"
        table.add_row(escape(name), f"[{colour}]{c.outcome}[/]", escape(c.detail[:80]))
    if verdict.cases:
        console.print(table)
    console.print(f"[bold]score {verdict.score.value:.3f}[/] — {escape(verdict.score.explanation)}")
    console.print("flags: " + (", ".join(verdict.flags) if verdict.flags else "none"))


async def _verify(backend: str, config: VerifyConfig, tests: CodeTests, sources: list[str],
                  pool_size: int) -> list[Verdict]:
    from practicum.domains import default_context
    from practicum.domains.code.env import code_verifier

    sessions = default_context(sandbox=backend).sessions
    assert sessions is not None
    verifier, untrusted = code_verifier(config, pool_size, sessions)
    try:
        return [await verifier.verify(tests, source) for source in sources]
    finally:
        await untrusted.close()
        await verifier.graders.close()  # type: ignore[attr-defined]
