"""``practicum sandbox``: run a program in the default (isolated) sandbox and print its result.

    practicum sandbox run prog.py --timeout 5 --memory-mb 256 --json
    practicum sandbox run main.py --workspace ./project      # copies ./project in first
    practicum sandbox run a.py b.py --same-session --json    # one pooled session, reset between
    practicum sandbox check                                   # which backends work here

Each program runs in a fresh session; nothing it writes comes back to the host. With
``--same-session`` the programs run one after the other in one pooled session, with the reset
that training does between episodes (a :class:`~practicum.sandbox.SandboxPool` of one: the
session is given back, emptied, and taken again), so what one program leaves behind - files,
processes, memory - is what the next one can find. ``--workspace`` is copied in before each
program. ``--json`` prints one JSON object for a single program, and a JSON list of records
(one per program, in order) when several are given or ``--same-session`` is set. The text
output shows the programs' output with terminal control characters made visible (``\x1b``), so
a program cannot rewrite the verdict line; ``--json`` is left as it is. Exit status: 0 when every
program ran to completion with exit code 0, 1 for any other result (the record says why), 2
when no sandbox could be used or the input is invalid.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shlex
import stat
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
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


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def visible(text: str) -> str:
    """``text`` with every terminal control character (C0 but newline and tab, DEL, C1) shown
    as an escape, so that printing it cannot move the cursor, recolour or rewrite lines."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


async def _run_all(files: list[Path], workspace: Path | None, limits: Limits, backend: str,
                   same_session: bool) -> list[ExecResult]:
    from practicum.sandbox import SandboxPool, get_sandbox

    programs = [(f.name, f.read_bytes()) for f in files]
    argvs = [_argv(name, source) for name, source in programs]
    extra = _workspace_files(workspace, limits.workspace_mb << 20) if workspace is not None else {}
    sandbox = get_sandbox(backend)
    pool = SandboxPool(sandbox, size=1, limits=limits) if same_session else None
    results = []
    try:
        for (name, source), argv in zip(programs, argvs, strict=True):
            session = await (pool.session() if pool is not None else sandbox.session(limits))
            async with session:  # closing a pooled session resets it and gives it back
                for rel, data in extra.items():
                    await session.write_file(rel, data)
                await session.write_file(name, source)
                results.append(await session.exec(argv))
    finally:
        if pool is not None:
            await pool.close()
    return results


def _print(result: ExecResult, title: str | None) -> None:
    if title is not None:
        console.rule(f"[bold]{escape(visible(title))}[/]")
    colour = "green" if result.ok else "red"
    head = f"[{colour}]{result.status}[/] exit code {result.exit_code} in {result.duration_s:.3f} s"
    if result.detail:
        head += f" - {escape(visible(result.detail))}"
    if result.truncated:
        head += " (output truncated)"
    console.print(head)
    for name, text in (("stdout", result.stdout), ("stderr", result.stderr)):
        if text:
            console.rule(name)
            shown = visible(text)
            console.out(shown, end="" if shown.endswith("\n") else "\n", highlight=False)


@sandbox_app.command()
def run(
    files: Annotated[list[Path], typer.Argument(help="The programs: .py or .sh files, or ones with a #! line.", metavar="PROG...")],
    workspace: Annotated[Path | None, typer.Option(help="A folder whose files are copied into the workspace first (nothing is copied back).")] = None,
    timeout: Annotated[float, typer.Option(help="Wall-clock limit in seconds (also the CPU-time limit).")] = 10.0,
    memory_mb: Annotated[int, typer.Option(help="Memory limit in MiB.")] = 512,
    backend: Annotated[str, typer.Option(help="'auto' (isolated; fails if it cannot be) or 'local' (NOT isolated).")] = "auto",
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object (status, exit_code, stdout, stderr, truncated, duration_s, ...); a list of them for several programs or --same-session.")] = False,
    same_session: Annotated[bool, typer.Option("--same-session", help="Run the programs one after the other in one pooled session, reset between them as training does between episodes.")] = False,
) -> None:
    """Run each PROG in a fresh sandbox session (or all in one reused session) and print the records."""
    try:
        for file in files:
            if not file.is_file():
                raise SandboxError(f"{file}: no such file")
        if workspace is not None and not workspace.is_dir():
            raise SandboxError(f"--workspace {workspace}: no such folder")
        if timeout <= 0 or memory_mb <= 0:
            raise SandboxError("--timeout and --memory-mb must be positive")
        limits = Limits(timeout_s=timeout, cpu_s=timeout, memory_mb=memory_mb)
        results = asyncio.run(_run_all(files, workspace, limits, backend, same_session))
    except (SandboxError, OSError, ValueError) as e:  # also an unreadable file, a bad #! line
        if as_json:
            typer.echo(json.dumps({"error": str(e)}))
        else:
            console.print(f"[bold red]error:[/] {escape(visible(str(e)))}", soft_wrap=True)
        raise typer.Exit(2) from None
    several = same_session or len(files) > 1
    if as_json:
        typer.echo(json.dumps([r.to_json() for r in results] if several else results[0].to_json()))
    else:
        for file, result in zip(files, results, strict=True):
            _print(result, str(file) if several else None)
    raise typer.Exit(0 if all(r.ok for r in results) else 1)


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
