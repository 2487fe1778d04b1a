"""SQL tasks: the task file format, the built-in task bank, and the prompts built from them.

A task (one JSON object; a ``.jsonl`` file holds one per line):

.. code-block:: json

    {"dataset": "nycflights13", "question": "How many flights left JFK?",
     "gold_sql": "SELECT count(*) FROM flights WHERE origin = 'JFK'"}

Optional fields: ``id`` (default: from the file name and line), ``answer`` (``rows``, the
default: the answer is a query whose result set is compared with the gold one; ``number`` or
``text``: the question asks for one value, and the answer may be that value or a query that
returns it), ``ordered`` (whether row order counts; default: whether the gold query has an
ORDER BY), ``tolerance`` (relative tolerance for numbers, default 1e-6), ``tier`` (``easy``,
``medium``, ``hard``), ``skills`` (tags such as ``join``, ``window``, ``null``), ``about``.
Gold queries are written in DuckDB's SQL (for the SQLite engine they are transpiled).

The built-in bank is ``bank/*.jsonl`` beside this module (:func:`builtin_tasks`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from practicum.domains.plugin import parse_task, read_task_json
from practicum.envs.base import read_jsonl
from practicum.errors import TaskError

BANK = Path(__file__).resolve().parent / "bank"
Tier = Literal["easy", "medium", "hard"]
AnswerKind = Literal["rows", "number", "text"]


class SqlTask(BaseModel):
    """One SQL task as written in a task file (the module docstring lists the fields)."""

    model_config = ConfigDict(extra="forbid")
    id: str | None = None
    dataset: str = Field(..., description="nycflights13, lahman, chinook or vega")
    question: str = Field(..., min_length=1)
    gold_sql: str = Field(..., min_length=1, description="the reference query, in DuckDB's SQL")
    answer: AnswerKind = "rows"
    ordered: bool | None = None
    tolerance: float = Field(1e-6, ge=0, lt=1)
    tier: Tier = "medium"
    skills: list[str] = Field(default_factory=list)
    about: str | None = None

    @field_validator("dataset")
    @classmethod
    def _known_dataset(cls, v: str) -> str:
        from practicum.domains.sql.datasets import DATASETS

        if v not in DATASETS:
            raise ValueError(f"unknown dataset {v!r}; known: {', '.join(DATASETS)}")
        return v


def _task_from(data: Any, where: str, default_id: str) -> SqlTask:
    task = parse_task(data, SqlTask, where, "sql")
    return task if task.id is not None else task.model_copy(update={"id": default_id})


def load_task_file(path: str | Path) -> SqlTask:
    """One task from a ``.json`` file; errors name the file and the field."""
    path = Path(path)
    data = read_task_json(path)
    return _task_from(data, str(path), path.stem)


def load_tasks(path: str | Path) -> list[SqlTask]:
    """Tasks from a ``.jsonl`` file, a ``.json`` file (one task, or a list), or a folder of them."""
    path = Path(path)
    if not path.exists():
        raise TaskError(f"no such sql task file or folder: {path}")
    if path.is_dir():
        tasks = [t for f in sorted(path.iterdir()) if f.suffix in (".json", ".jsonl") for t in load_tasks(f)]
        if not tasks:
            raise TaskError(f"{path}: no sql tasks (expected .json or .jsonl files)")
        return _unique(tasks, str(path))
    if path.suffix == ".jsonl":
        tasks = [_task_from(data, f"{path}:{n}", f"{path.stem}/{n}") for n, data in read_jsonl(path)]
        if not tasks:
            raise TaskError(f"{path}: no tasks")
        return _unique(tasks, str(path))
    data = read_task_json(path)
    if isinstance(data, list):
        return _unique([_task_from(d, f"{path}[{i}]", f"{path.stem}/{i}") for i, d in enumerate(data)], str(path))
    return [_task_from(data, str(path), path.stem)]


def _unique(tasks: list[SqlTask], where: str) -> list[SqlTask]:
    seen: set[str] = set()
    for t in tasks:
        assert t.id is not None
        if t.id in seen:
            raise TaskError(f"{where}: task id {t.id!r} occurs twice")
        seen.add(t.id)
    return tasks


def builtin_tasks() -> list[SqlTask]:
    """The task bank shipped with the domain (``bank/*.jsonl``)."""
    return load_tasks(BANK)
