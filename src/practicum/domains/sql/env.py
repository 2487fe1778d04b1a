"""The sql domain's task source and environments.

Prompts. The user message names the dataset (with its notes: units, keys), the question, and
what form the answer takes. ``prompt_schema`` decides how much schema it shows: ``full`` (every
table and its columns), ``used`` (the tables the gold query reads: a hint, but short), or
``none`` (the model inspects it with the tools); ``auto`` is ``used`` in single-turn mode and
``none`` in multi-turn mode.

Environments:

* :class:`SqlSingleEnv` (``mode: single``): one reply, whose last fenced block (or
  ``Answer: ...`` line) is verified.
* :class:`SqlToolEnv` (``mode: multi``): the shared tool machinery
  (:class:`~practicum.envs.agent.ToolEnvironment`) with ``schema`` (tables and columns),
  ``describe(table)`` (columns, types, row count, sample rows), ``sql(query)`` (a read-only
  query: at most ``show_rows`` rows shown, ``timeout_s`` per query, ``max_queries`` per episode)
  and ``submit(answer)``. Queries that fail or are refused come back as tool errors the model can
  read. An episode that ends at a limit without submitting scores 0.

Episode info (``Observation.info``): ``flags`` (the verifier's), and ``sql``: ``{"queries",
"failed_queries"}`` in multi-turn mode.
"""

from __future__ import annotations

import asyncio
import hashlib
from typing import Any, Literal

from practicum.domains.plugin import Verdict
from practicum.domains.sql.datasets import DATASETS, NOTES
from practicum.domains.sql.execute import Database, QueryFailed, ResultSet
from practicum.domains.sql.guard import Inspection, inspect_sql
from practicum.domains.sql.tasks import SqlTask
from practicum.domains.sql.verifier import SqlVerifier
from practicum.envs.agent import ToolEnvironment
from practicum.envs.base import Observation, cycle_index
from practicum.errors import TaskError
from practicum.records import Message, Score, Task
from practicum.tools import Tool, ToolError, tool

SINGLE_TURN_SYSTEM_PROMPT = (
    "You are an expert data analyst. Answer the question with one SQL query ({dialect}) over the "
    "dataset described. Reply with the query in a ```sql code block."
)
MULTI_TURN_SYSTEM_PROMPT = (
    "You are an expert data analyst with a read-only SQL database ({dialect}). Use the tools: schema "
    "lists the tables and their columns, describe shows one table with sample rows, sql runs a query and "
    "shows its first rows. When you are sure, call submit with your final SQL query as the answer."
)
DIALECTS = {"duckdb": "DuckDB's SQL", "sqlite": "SQLite's SQL"}  # fills {dialect} in the prompts
PromptSchema = Literal["auto", "full", "used", "none"]


def schema_text(db: Database, tables: list[str] | None = None) -> str:
    """``table(column TYPE, ...)`` lines, for all tables or the ones named."""
    names = [t for t in db.tables if tables is None or t.lower() in {x.lower() for x in tables}]
    return "\n".join(f"{t}({', '.join(f'{c.name} {c.type}' for c in db.tables[t])})" for t in names)


def answer_instructions(task: SqlTask, mode: str) -> str:
    how = "call submit with" if mode == "multi" else "reply with"
    if task.answer == "rows":
        return (f"Answer: {how} one SQL query whose result is the answer. Return exactly the columns the "
                "question asks for (their names and order do not matter); row order matters only where "
                "the question asks for one.")
    kind = "number" if task.answer == "number" else "value"
    if mode == "multi":
        return f"Answer: the question asks for one {kind}: call submit with it, or with a SQL query that returns it."
    return (f"Answer: the question asks for one {kind}: reply with a SQL query that returns it in a ```sql block, "
            f"or end your reply with a line 'Answer: <{kind}>'.")


def user_message(task: SqlTask, db: Database, mode: str, prompt_schema: PromptSchema) -> str:
    d = DATASETS[task.dataset]
    show = prompt_schema if prompt_schema != "auto" else ("none" if mode == "multi" else "used")
    parts = [f"Dataset: {task.dataset} ({d.about}), a {db.engine} database."]
    if show == "full":
        parts.append("Tables:\n" + schema_text(db))
    elif show == "used":
        ins = inspect_sql(task.gold_sql, set(db.tables), "duckdb")
        used = sorted(ins.tables) if isinstance(ins, Inspection) else None
        parts.append("Relevant tables:\n" + schema_text(db, used))
    else:
        parts.append("Tables: " + ", ".join(db.tables))
    if task.dataset in NOTES:
        parts.append("Notes: " + NOTES[task.dataset])
    parts.append(f"Question: {task.question}")
    parts.append(answer_instructions(task, mode))
    return "\n\n".join(parts)


class SqlSource:
    """SQL tasks as training and held-out tasks. The held-out set is a fixed function of the task
    ids (their hashes), so it does not move with the seed; the training order is a pure function
    of (seed, index)."""

    def __init__(self, domain: str, tasks: list[SqlTask], verifier: SqlVerifier, preamble: list[Message],
                 mode: str, prompt_schema: PromptSchema, seed: int, eval_fraction: float, eval_size: int) -> None:
        if not tasks:
            raise TaskError(f"domain {domain!r}: no sql tasks (check the datasets and tiers options)")
        self.domain = domain
        self.seed = seed
        self.verifier = verifier
        self.preamble = preamble
        self.mode = mode
        self.prompt_schema = prompt_schema
        ranked = sorted(tasks, key=lambda t: hashlib.sha1(str(t.id).encode()).hexdigest())
        n_eval = min(int(len(tasks) * eval_fraction), eval_size)
        held = {t.id for t in ranked[:n_eval]}
        self._eval = [t for t in tasks if t.id in held]
        self._train = [t for t in tasks if t.id not in held] or self._eval
        self._tasks: dict[str, Task] = {}

    def task(self, t: SqlTask) -> Task:
        assert t.id is not None
        if t.id not in self._tasks:
            db = self.verifier.database(t.dataset)
            self._tasks[t.id] = Task(
                id=t.id, domain=self.domain,
                prompt=[*self.preamble, Message(role="user", content=user_message(t, db, self.mode, self.prompt_schema))],
                target=t.model_dump(), metadata={"dataset": t.dataset, "tier": t.tier, "skills": t.skills,
                                                 "answer": t.answer, "reference": t.gold_sql})
        return self._tasks[t.id]

    def eval_tasks(self) -> list[Task]:
        return [self.task(t) for t in self._eval]

    def train_task(self, index: int) -> Task:
        return self.task(self._train[cycle_index(index, len(self._train), self.seed)])

    def __len__(self) -> int:
        return len(self._train) + len(self._eval)


def _info(verdict: Verdict | None, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"flags": list(verdict.flags) if verdict else [], **(extra or {})}


class SqlSingleEnv:
    """One reply, verified."""

    def __init__(self, domain: str, verifier: SqlVerifier) -> None:
        self.domain = domain
        self.verifier = verifier
        self.task: SqlTask | None = None

    async def reset(self, task: Task) -> Observation:
        self.task = SqlTask.model_validate(task.target)
        return Observation(messages=list(task.prompt))

    def tools(self) -> list[Tool]:
        return []

    async def step(self, reply: str) -> Observation:
        assert self.task is not None, "step() before reset()"
        verdict = await self.verifier.verify(self.task, reply)
        return Observation(messages=[], done=True, score=verdict.score, info=_info(verdict))

    async def finish(self, reason: str) -> Observation:
        return Observation(messages=[], done=True)  # no reply to verify: scored 0

    async def close(self) -> None:
        self.task = None


def format_result(result: ResultSet, show_rows: int) -> str:
    """A result as a small text table: the first ``show_rows`` rows and how many there were."""
    def cell(v: object) -> str:
        text = "NULL" if v is None else str(v)
        return text if len(text) <= 60 else text[:57] + "..."

    lines = [" | ".join(result.columns)]
    lines += [" | ".join(cell(v) for v in row) for row in result.rows[:show_rows]]
    n = len(result.rows)
    if result.truncated:
        lines.append(f"({min(n, show_rows)} of more than {n} rows shown)")
    elif n > show_rows:
        lines.append(f"({show_rows} of {n} rows shown)")
    else:
        lines.append(f"({n} row{'s' if n != 1 else ''})")
    return "\n".join(lines)


class SqlToolEnv(ToolEnvironment):
    """A multi-turn episode: inspect the schema, run queries, submit (see the module docstring)."""

    def __init__(self, domain: str, verifier: SqlVerifier, timeout_s: float, show_rows: int, max_queries: int) -> None:
        super().__init__(domain)
        self.verifier = verifier
        self.timeout_s = timeout_s
        self.show_rows = show_rows
        self.max_queries = max_queries
        self.sql_task: SqlTask | None = None
        self.queries = 0
        self.failed_queries = 0
        self.verdict: Verdict | None = None

    async def setup(self, task: Task) -> None:
        self.sql_task = SqlTask.model_validate(task.target)

    def _db(self) -> Database:
        assert self.sql_task is not None
        return self.verifier.database(self.sql_task.dataset)

    def make_tools(self) -> list[Tool]:
        env = self

        @tool
        async def schema() -> str:
            """List the tables of the database and their columns with types."""
            return schema_text(env._db())

        @tool
        async def describe(table: str) -> str:
            """Show one table: its columns and types, its number of rows and three sample rows."""
            db = env._db()
            match = next((t for t in db.tables if t.lower() == table.strip().strip('"').lower()), None)
            if match is None:
                raise ToolError(f"no table {table!r}; tables: {', '.join(db.tables)}")
            count = await env._query(f'SELECT count(*) FROM "{match}"', 1)
            sample = await env._query(f'SELECT * FROM "{match}" LIMIT 3', 3)
            cols = "\n".join(f"  {c.name} {c.type}" for c in db.tables[match])
            return f"{match}: {count.rows[0][0]} rows\ncolumns:\n{cols}\nsample:\n{format_result(sample, 3)}"

        @tool
        async def sql(query: str) -> str:
            """Run one read-only SQL query and see its first rows."""
            if env.queries >= env.max_queries:
                raise ToolError(f"you have run all {env.max_queries} queries; call submit with your final query")
            env.queries += 1
            db = env._db()
            ins = inspect_sql(query, set(db.tables), db.dialect)
            if not isinstance(ins, Inspection):
                env.failed_queries += 1
                raise ToolError(f"refused: {ins.reason}")
            try:
                result = await env._query(query, env.show_rows)
            except ToolError:
                env.failed_queries += 1
                raise
            return format_result(result, env.show_rows)

        return [schema, describe, sql]

    async def _query(self, query: str, max_rows: int) -> ResultSet:
        try:
            return await asyncio.to_thread(self._db().run, query, self.timeout_s, max(max_rows, 1000))
        except QueryFailed as e:
            raise ToolError(f"the query failed ({e.kind}): {e}") from None

    async def score(self, reason: str) -> Score:
        assert self.sql_task is not None
        if self.submitted is None:
            return Score(value=0.0, components={"correct": 0.0, "executed": 0.0},
                         explanation=f"{reason}: nothing was submitted")
        self.verdict = await self.verifier.verify(self.sql_task, self.submitted)
        return self.verdict.score

    def _info(self) -> dict[str, Any]:
        return {**super()._info(), **_info(self.verdict, {"sql": {"queries": self.queries,
                                                                   "failed_queries": self.failed_queries}})}


class SqlDomain:
    """Plugs the sql task source and an environment factory together."""

    def __init__(self, name: str, source: SqlSource, verifier: SqlVerifier, mode: str, timeout_s: float,
                 show_rows: int, max_queries: int) -> None:
        self.name = name
        self.source = source
        self.verifier = verifier
        self.mode = mode
        self.timeout_s = timeout_s
        self.show_rows = show_rows
        self.max_queries = max_queries

    def make_env(self) -> SqlSingleEnv | SqlToolEnv:
        if self.mode == "multi":
            return SqlToolEnv(self.name, self.verifier, self.timeout_s, self.show_rows, self.max_queries)
        return SqlSingleEnv(self.name, self.verifier)

    async def close(self) -> None:
        """Nothing to release: database connections are shared by the process (read-only)."""
