"""``practicum verify``: score one answer with a verifier, from the command line.

``practicum verify code --task TASK.json --answer solution.py [--json]`` runs the code verifier
(:mod:`practicum.verify.code`) in the default sandbox and prints the score, the outcome of each
hidden test and the hack patterns it flagged; ``--json`` prints one JSON object with ``value``,
``components``, ``explanation``, ``flags`` (empty when none), ``cases`` and timings. The exit code
is 0 whenever the answer was scored (whatever the score), 2 for a bad task or answer file, and 1
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
from practicum.verify.code import CodeTests, CodeVerifier, Verdict, VerifyConfig

verify_app = typer.Typer(no_args_is_help=True, help="Score answers with Practicum's verifiers.")
console = Console(highlight=False)


@verify_app.callback()
def _group() -> None:
    """Score answers with Practicum's verifiers."""


@verify_app.command("code")
def code(
    task: Annotated[Path, typer.Option("--task", help="A code task: task.json, a task folder, or a .jsonl file (with --id).")],
    answer: Annotated[Path, typer.Option("--answer", help="The answer to score: a Python file (or a reply with a ```python block).")],
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
    task_id: Annotated[str | None, typer.Option("--id", help="Which task of a file holding several.")] = None,
    scoring: Annotated[str, typer.Option(help="fraction (of hidden tests passed) or all (1 only if all pass).")] = "fraction",
    sandbox: Annotated[str, typer.Option(help="Sandbox backend (`practicum doctor` lists them).")] = "auto",
) -> None:
    """Score ANSWER against the hidden tests of TASK, in fresh sandbox sessions."""
    from practicum.envs.code import extract_code, load_tasks

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
        try:
            text = answer.read_text()
        except (OSError, UnicodeDecodeError) as e:
            raise PracticumError(f"cannot read answer {answer}: {e}") from None
        spec = tasks[0].hidden()
        source = text if answer.suffix == ".py" else extract_code(text, spec.entry_point)
        mode: Literal["fraction", "all"] = "all" if scoring == "all" else "fraction"
        verdict = asyncio.run(_verify(sandbox, VerifyConfig(scoring=mode), spec, source))
    except RolloutFailure as e:
        console.print(f"[bold red]verifier failed:[/] {escape(str(e))}", soft_wrap=True)
        raise typer.Exit(1) from None
    except PracticumError as e:
        console.print(f"[bold red]error:[/] {escape(str(e))}", soft_wrap=True)
        raise typer.Exit(2) from None
    if as_json:
        typer.echo(json.dumps(verdict.to_json()))
        return
    table = Table("test", "outcome", "detail")
    for c in verdict.cases:
        colour = "green" if c.passed else "red"
        name = c.id if c.label in c.id else f"{c.id}  {c.label}"
        table.add_row(escape(name), f"[{colour}]{c.outcome}[/]", escape(c.detail[:80]))
    if verdict.cases:
        console.print(table)
    console.print(f"[bold]score {verdict.score.value:.3f}[/] — {escape(verdict.score.explanation)}")
    console.print("flags: " + (", ".join(verdict.flags) if verdict.flags else "none"))


async def _verify(backend: str, config: VerifyConfig, tests: CodeTests, source: str) -> Verdict:
    from practicum.sandbox import get_sandbox

    return await CodeVerifier(get_sandbox(backend), config).verify(tests, source)
