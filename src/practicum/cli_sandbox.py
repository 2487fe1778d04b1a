"""``practicum sandbox``: run a program in the default (isolated) sandbox and print its result.

    practicum sandbox run prog.py --timeout 5 --memory-mb 256 --json
    practicum sandbox run main.py --workspace ./project      # copies ./project in first
    practicum sandbox check                                   # which backends work here

The program runs in a fresh session; nothing it writes comes back to the host. Exit status:
0 when the program ran to completion with exit code 0, 1 for any other result (the record says
why), 2 when no sandbox could be used or the input is invalid.
"""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import stat
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from practicum.errors import SandboxError
from practicum.sandbox.base import ExecResult, Limits

sandbox_app = typer.Typer(no_args_is_help=True, help="Run programs in the sandbox; check which backends work.")
console = Console(highlight=False)


@sandbox_app.callback()
def _group() -> None:
    """Run untrusted programs in an isolated sandbox."""


def _argv(name: str, source: bytes) -> list[str]:
    """How to start FILE inside: by its suffix, else by its #! line."""
    if name.endswith(".py"):
        return ["python", name]
    if name.endswith(".sh"):
        return ["/bin/sh", name]
    if source.startswith(b"#!"):
        line = source.split(b"\n", 1)[0][2:].decode(errors="replace").strip()
        if line:
            return [*shlex.split(line), name]
    raise SandboxError(f"{name}: cannot tell how to run it; use a .py or .sh file or start it with a #! line")


def _workspace_files(folder: Path, budget: int) -> dict[str, bytes]:
    """Regular files under ``folder`` (links are skipped, never followed), up to ``budget`` bytes."""
    files: dict[str, bytes] = {}
    total = 0
    for root, dirs, names in os.walk(folder, followlinks=False):
        dirs[:] = sorted(d for d in dirs if not os.path.islink(os.path.join(root, d)))
        for n in sorted(names):
            p = os.path.join(root, n)
            st = os.lstat(p)
            if not stat.S_ISREG(st.st_mode):
                continue
            total += st.st_size
            if total > budget:
                raise SandboxError(f"--workspace {folder}: more than {budget >> 20} MiB of files (the workspace cap)")
            files[os.path.relpath(p, folder)] = Path(p).read_bytes()
    return files


async def _run(file: Path, workspace: Path | None, limits: Limits, backend: str) -> ExecResult:
    from practicum.sandbox import get_sandbox

    source = file.read_bytes()
    files = _workspace_files(workspace, limits.workspace_mb << 20) if workspace is not None else {}
    name = file.name
    argv = _argv(name, source)
    async with await get_sandbox(backend).session(limits) as session:
        for rel, data in files.items():
            await session.write_file(rel, data)
        await session.write_file(name, source)
        return await session.exec(argv)


@sandbox_app.command()
def run(
    file: Annotated[Path, typer.Argument(help="The program: a .py or .sh file, or one with a #! line.")],
    workspace: Annotated[Path | None, typer.Option(help="A folder whose files are copied into the workspace first (nothing is copied back).")] = None,
    timeout: Annotated[float, typer.Option(help="Wall-clock limit in seconds (also the CPU-time limit).")] = 10.0,
    memory_mb: Annotated[int, typer.Option(help="Memory limit in MiB.")] = 512,
    backend: Annotated[str, typer.Option(help="'auto' (isolated; fails if it cannot be) or 'local' (NOT isolated).")] = "auto",
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object (status, exit_code, stdout, stderr, truncated, duration_s, ...).")] = False,
) -> None:
    """Run FILE in a fresh sandbox session and print the result record."""
    try:
        if not file.is_file():
            raise SandboxError(f"{file}: no such file")
        if workspace is not None and not workspace.is_dir():
            raise SandboxError(f"--workspace {workspace}: no such folder")
        if timeout <= 0 or memory_mb <= 0:
            raise SandboxError("--timeout and --memory-mb must be positive")
        limits = Limits(timeout_s=timeout, cpu_s=timeout, memory_mb=memory_mb)
        result = asyncio.run(_run(file, workspace, limits, backend))
    except (SandboxError, OSError, ValueError) as e:  # also an unreadable file, a bad #! line
        if as_json:
            typer.echo(json.dumps({"error": str(e)}))
        else:
            console.print(f"[bold red]error:[/] {e}", soft_wrap=True)
        raise typer.Exit(2) from None
    if as_json:
        typer.echo(json.dumps(result.to_json()))
    else:
        colour = "green" if result.ok else "red"
        head = f"[{colour}]{result.status}[/] exit code {result.exit_code} in {result.duration_s:.3f} s"
        if result.detail:
            head += f" - {result.detail}"
        if result.truncated:
            head += " (output truncated)"
        console.print(head)
        for title, text in (("stdout", result.stdout), ("stderr", result.stderr)):
            if text:
                console.rule(title)
                console.out(text, end="" if text.endswith("\n") else "\n", highlight=False)
    raise typer.Exit(0 if result.ok else 1)


@sandbox_app.command()
def check() -> None:
    """Report which sandbox backends work on this machine, and why the others do not."""
    from practicum.sandbox import report

    table = Table(title="sandbox backends")
    for col in ("component", "status", "detail"):
        table.add_column(col)
    for name, ok, why in report():
        table.add_row(name, "[green]ok[/]" if ok else "[red]unavailable[/]", why)
    console.print(table)
