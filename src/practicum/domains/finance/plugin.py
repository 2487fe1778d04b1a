"""The ``finance`` plugin object: build a domain from a section, load task files, verify answers."""

from __future__ import annotations

from collections.abc import Awaitable
from pathlib import Path
from typing import Any

import practicum.domains.annotations as ann
from practicum.domains.finance.env import (
    DEFAULT_SYSTEM_PROMPT,
    EVAL_SEED,
    EVAL_SIZE,
    MULTI_SYSTEM_PROMPT,
    RUN_LIMITS,
    FinanceDomain,
    FinanceEnv,
    FinanceSource,
    FinanceToolEnv,
)
from practicum.domains.finance.options import FinanceOptions
from practicum.domains.finance.tasks import load_annotated, load_task_file, load_tasks, score
from practicum.domains.plugin import BuildContext, Verdict, held_out, preamble, resolve_path, section_prompt
from practicum.envs.base import cycle_index
from practicum.errors import ConfigError
from practicum.records import Task

COMPONENTS = ("correct", "credit")


class FileSource:
    """Tasks from files: the leading ``eval_fraction`` held out, the rest shuffled per epoch."""

    def __init__(self, domain: str, tasks: list[Task], seed: int, eval_fraction: float, eval_size: int | None) -> None:
        self.domain, self.seed = domain, seed
        n_eval = int(len(tasks) * eval_fraction) if eval_size is None else min(eval_size, len(tasks) - 1)
        self._eval, self._train = tasks[:n_eval], tasks[n_eval:] or tasks[:n_eval]

    def eval_tasks(self) -> list[Task]:
        return list(self._eval)

    def train_task(self, index: int) -> Task:
        return self._train[cycle_index(index, len(self._train), self.seed)]


class FinancePlugin:
    name = "finance"
    about = ("Financial statements of real companies (synthetic figures, identities hold): ratios, growth, margins, "
             "working capital, covenants, NPV/IRR, planted inconsistencies")
    options_model = FinanceOptions
    components = COMPONENTS
    tools = ("python", "submit")  # multi mode; single mode (the default) answers in one reply

    def build(self, section: Any, options: FinanceOptions, ctx: BuildContext) -> FinanceDomain:
        system, examples = section_prompt(section, MULTI_SYSTEM_PROMPT if options.mode == "multi" else DEFAULT_SYSTEM_PROMPT)
        msgs = preamble(system, examples)
        src = options.source
        judge = None
        if options.judge.enabled:
            cache = Path(options.judge.cache_dir) if options.judge.cache_dir else ctx.data_dir("judge")
            judge = ann.Judge(options.judge, cache)
        if src.kind == "generated":
            n_eval, eval_seed = held_out(section, options.eval_size, EVAL_SIZE, options.eval_seed, EVAL_SEED)
            options = options.model_copy(update={"eval_size": n_eval, "eval_seed": eval_seed})
            source: Any = FinanceSource(section.name, options, ctx.seed, msgs)
        else:
            path = resolve_path(src.path or "", ctx.base_dir)
            if not path.exists():
                raise ConfigError(f"domain {section.name!r}: source.path: {path} does not exist")
            tasks = (load_annotated(path, section.name, msgs) if src.kind == "annotated"
                     else load_tasks(path, section.name, msgs))
            n_eval, _ = held_out(section, options.eval_size, int(len(tasks) * src.eval_fraction))
            source = FileSource(section.name, tasks, ctx.seed, src.eval_fraction, n_eval)
        def scorer(task: Task, reply: str) -> Awaitable[Verdict]:
            return score(task, reply, judge)

        if options.mode == "single":
            return FinanceDomain(section.name, source, lambda: FinanceEnv(section.name, scorer))
        if ctx.sessions is None:
            raise ConfigError(f"domain {section.name!r}: mode multi needs a sandbox (the build context has no session pool)")
        pool = ctx.sessions(RUN_LIMITS, size=2)
        return FinanceDomain(section.name, source, lambda: FinanceToolEnv(
            section.name, scorer, pool, options.max_runs, options.run_timeout_s, options.output_chars), pool)

    def load_task(self, path: Path) -> Task:
        return load_task_file(path)

    async def verify(self, task: Task, answer: str, ctx: BuildContext) -> Verdict:
        judge = ann.judge_from_env(ctx.data_dir("judge")) if task.metadata.get("source") == "annotated" else None
        return await score(task, answer, judge)


plugin = FinancePlugin()
