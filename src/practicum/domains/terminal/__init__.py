"""The ``terminal`` domain: an agent works in a sandboxed workspace through a shell; hidden tests decide.

Config (a domain section with ``env: terminal``; docs/terminal.md has the whole story)::

    - name: terminal
      env: terminal
      source: {kind: tasks, path: ../tasks/terminal}
      options: {command_timeout_s: 60}

``source``: ``tasks`` only — a folder of Harbor-layout task folders, or one task folder (the
format: :mod:`practicum.domains.terminal.tasks`, docs/terminal-tasks.md). ``options``:
:class:`TerminalOptions`. The environment (:mod:`practicum.domains.terminal.env`) offers
``bash``, ``read_file``, ``write_file`` and ``submit``; the task's ``tests/test.sh`` writes the
reward after the episode. Components: ``reward`` (and any named rewards the task's verifier
writes to ``reward.json``).

Task file for ``practicum verify terminal --task TASK_FOLDER --answer script.sh``: a task folder;
the answer is a shell script, run with bash from the task's workdir as the agent's work (as
Harbor's oracle runs ``solution/solve.sh``), after which the hidden tests score the workspace.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from practicum.domains.plugin import BuildContext, Options, SourceOptions, Verdict, resolve_path
from practicum.errors import TaskError
from practicum.records import Score, Task

__all__ = ["TerminalOptions", "TerminalPlugin", "plugin"]


class TerminalSourceOptions(SourceOptions):
    kind: Literal["tasks"] = Field(..., description="tasks: a folder of task folders, or one task folder (path).")


class TerminalOptions(Options):
    """Settings of a ``terminal`` domain: ``source:`` and ``options:`` of its section."""

    source: TerminalSourceOptions = Field(..., description="The task folders (kind tasks, path).")
    sandbox: str | None = Field(None, description="Sandbox backend of the episodes (default: the run's; `practicum doctor` lists them).")
    command_timeout_s: float = Field(60.0, gt=0, description="Most seconds one bash command of the agent may take.")


class TerminalPlugin:
    name = "terminal"
    about = "Multi-turn shell work in a sandboxed workspace (Harbor task folders); the task's hidden tests decide."
    options_model = TerminalOptions
    components = ("reward",)
    tools = ("bash", "read_file", "write_file", "submit")

    def build(self, section: Any, options: TerminalOptions, ctx: BuildContext) -> Any:
        from practicum.domains.terminal.env import TerminalDomain

        return TerminalDomain(section.name, resolve_path(options.source.path or "", ctx.base_dir), ctx.seed,
                              sandbox=options.sandbox or ctx.sandbox, command_timeout_s=options.command_timeout_s)

    def load_task(self, path: Path) -> Task:
        from practicum.domains.terminal.env import TerminalSource

        if not (Path(path) / "task.toml").is_file():
            raise TaskError(f"{path}: not a terminal task folder (no task.toml); give one task folder")
        return TerminalSource(self.name, path).eval_tasks()[0]

    async def verify(self, task: Task, answer: str, ctx: BuildContext) -> Verdict:
        from practicum.domains.terminal.env import TerminalDomain, run_answer

        domain = TerminalDomain(self.name, task.metadata["task_dir"], sandbox=ctx.sandbox)
        run = await run_answer(domain, task, answer)
        score = run.score or Score(value=0.0, explanation="nothing was scored")
        return Verdict(score)


plugin = TerminalPlugin()
