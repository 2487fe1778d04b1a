"""The ``sql`` domain: answer questions about real datasets with SQL, verified by running it.

Config (a domain section with ``env: sql``; docs/sql.md has the whole story)::

    - name: sql
      env: sql
      options: {mode: multi, datasets: [nycflights13, chinook], tiers: [easy, medium]}

``source`` (default ``bank``): ``bank``, the built-in 169 tasks over four datasets
(:mod:`practicum.domains.sql.tasks`); ``tasks``/``jsonl``, task files (``path``).

The parts, each in its own module: datasets built into DuckDB/SQLite at first use
(:mod:`~practicum.domains.sql.datasets`), the query reader that refuses writes, files and
extensions (:mod:`~practicum.domains.sql.guard`), the hardened runner
(:mod:`~practicum.domains.sql.execute`), result-set comparison
(:mod:`~practicum.domains.sql.compare`), the verifier (:mod:`~practicum.domains.sql.verifier`)
and the environments (:mod:`~practicum.domains.sql.env`). Components: ``correct`` (1 when the
result matches), ``executed`` (the query ran); ``flag:<name>`` components come with flagged
answers.

Task file for ``practicum verify sql --task TASK --answer ANSWER``: one JSON object, as small as
``{"dataset": "nycflights13", "question": "...", "gold_sql": "..."}``; the answer file holds
the submitted SQL (or a reply with a ```sql block, or the value, for value questions).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator

from practicum.domains.plugin import (
    BuildContext,
    Options,
    SourceOptions,
    Verdict,
    held_out,
    preamble,
    resolve_path,
    section_prompt,
    task_target,
)
from practicum.domains.sql.datasets import DATASETS
from practicum.domains.sql.tasks import SqlTask, Tier, builtin_tasks, load_task_file, load_tasks
from practicum.domains.sql.verifier import COMPONENTS, SqlVerifier
from practicum.errors import TaskError
from practicum.records import Task

EVAL_SIZE = 30  # held-out tasks when neither options.eval_size nor the section's eval_size is set

__all__ = ["SqlOptions", "SqlPlugin", "SqlTask", "SqlVerifier", "plugin"]


class SqlSourceOptions(SourceOptions):
    kind: Literal["bank", "tasks", "jsonl"] = Field(..., description="bank: the built-in task bank; tasks/jsonl: task files or a folder of them (path).")


class SqlOptions(Options):
    """Settings of a ``sql`` domain: ``source:`` and ``options:`` of its section."""

    source: SqlSourceOptions = Field(default_factory=lambda: SqlSourceOptions.model_validate({"kind": "bank"}),
                                     description="Where tasks come from (default: the built-in bank).")
    mode: Literal["single", "multi"] = Field("multi", description="single: answer with one query; multi: inspect the schema and run queries with tools, then submit (set rollout.max_turns > 1).")
    engine: Literal["duckdb", "sqlite"] = Field("duckdb", description="Database engine the queries run on (gold queries are transpiled for sqlite; tasks whose gold does not run there are left out).")
    datasets: list[str] | None = Field(None, description="Datasets to draw tasks from (default: all): nycflights13, lahman, chinook, vega.")
    tiers: list[Tier] | None = Field(None, description="Difficulty tiers to draw from (default: all): easy, medium, hard.")
    prompt_schema: Literal["auto", "full", "used", "none"] = Field("auto", description="Schema shown in the prompt: full, used (the tables the gold query reads), none; auto: used for single, none for multi.")
    timeout_s: float = Field(5.0, gt=0, le=120, description="Most seconds one query (tool or verification) may run.")
    max_rows: int = Field(10_000, ge=1, description="Most rows a submitted query may return; more is a wrong answer.")
    show_rows: int = Field(20, ge=1, le=500, description="multi: rows of a query result shown to the model.")
    max_queries: int = Field(12, ge=0, description="multi: sql tool calls allowed per episode.")
    memory_limit: str = Field("1GB", description="DuckDB memory limit for queries (e.g. 512MB, 2GB).")
    eval_size: int | None = Field(None, ge=0, description="Held-out tasks (at most source.eval_fraction of them); default: the section's eval_size if set, else 30.")

    @field_validator("datasets")
    @classmethod
    def _known(cls, v: list[str] | None) -> list[str] | None:
        unknown = [d for d in v or [] if d not in DATASETS]
        if unknown:
            raise ValueError(f"unknown dataset(s) {', '.join(unknown)}; known: {', '.join(DATASETS)}")
        return v


def _select(tasks: list[SqlTask], options: SqlOptions) -> list[SqlTask]:
    return [t for t in tasks if (options.datasets is None or t.dataset in options.datasets)
            and (options.tiers is None or t.tier in options.tiers)]


def _to_task(t: SqlTask, domain: str = "sql") -> Task:
    from practicum.domains.sql.env import DIALECTS, SINGLE_TURN_SYSTEM_PROMPT, SqlSource

    verifier = SqlVerifier(_home())
    source = SqlSource(domain, [t], verifier, preamble(SINGLE_TURN_SYSTEM_PROMPT.format(dialect=DIALECTS["duckdb"]), []),
                       "single", "used", 0, 0.0, 0)
    return source.train_task(0)


def _home() -> Path:
    from practicum.models import practicum_home

    return practicum_home()


_VERIFIERS: dict[tuple[Path, str], SqlVerifier] = {}


class SqlPlugin:
    name = "sql"
    about = "Data analysis in SQL over real datasets (nycflights13, Lahman, Chinook, vega), verified by result sets."
    options_model = SqlOptions
    components = COMPONENTS
    tools = ("schema", "describe", "sql", "submit")  # multi mode; single mode answers in one reply

    def build(self, section: Any, options: SqlOptions, ctx: BuildContext) -> Any:
        from practicum.domains.sql.env import (
            DIALECTS,
            MULTI_TURN_SYSTEM_PROMPT,
            SINGLE_TURN_SYSTEM_PROMPT,
            SqlDomain,
            SqlSource,
        )

        src = options.source
        tasks = builtin_tasks() if src.kind == "bank" else load_tasks(resolve_path(src.path or "", ctx.base_dir))
        tasks = _select(tasks, options)
        verifier = SqlVerifier(ctx.home, options.engine, options.timeout_s, options.max_rows, options.memory_limit)
        if options.engine != "duckdb":
            tasks = [t for t in tasks if _runs(verifier, t)]
        default = MULTI_TURN_SYSTEM_PROMPT if options.mode == "multi" else SINGLE_TURN_SYSTEM_PROMPT
        system, examples = section_prompt(section, default.format(dialect=DIALECTS[options.engine]))
        n_eval, _ = held_out(section, options.eval_size, EVAL_SIZE)
        source = SqlSource(section.name, tasks, verifier, preamble(system, examples), options.mode,
                           options.prompt_schema, ctx.seed, src.eval_fraction, n_eval)
        return SqlDomain(section.name, source, verifier, options.mode, options.timeout_s, options.show_rows,
                         options.max_queries)

    def load_task(self, path: Path) -> Task:
        return _to_task(load_task_file(path))

    async def verify(self, task: Task, answer: str, ctx: BuildContext) -> Verdict:
        sql_task = task_target(task, SqlTask, "a sql task")
        key = (ctx.home, "duckdb")
        verifier = _VERIFIERS.get(key)
        if verifier is None:
            verifier = _VERIFIERS[key] = SqlVerifier(ctx.home)
        return await verifier.verify(sql_task, answer)


def _runs(verifier: SqlVerifier, task: SqlTask) -> bool:
    """Whether a task's gold query runs on the verifier's engine (bank queries are DuckDB's)."""
    try:
        verifier.gold(task)
    except TaskError:
        return False
    return True


plugin = SqlPlugin()
