"""The longctx task source, its two environments, and the haystack folders agentic episodes read.

In-context mode (:class:`InContextEnv`) is single-turn: the prompt holds every document of the
haystack (``<file path="...">`` blocks) and the question; the reply's ``<answer>`` is checked.

Agentic mode (:class:`AgentEnv`) puts the haystack in a sandbox session as files and offers three
bounded, read-only tools and ``submit``:

* ``list_files(path=".")``: the files under a folder, with their sizes; at most 300 lines;
* ``grep(pattern, path=".", ignore_case=False, fixed=False)``: GNU ``grep -rnI -E`` (or ``-F``)
  run inside the sandbox with a wall-clock timeout (``tool_timeout_s``); at most 60 matching
  lines, each cut to 300 characters;
* ``read_file(path, start_line=1, num_lines=200)``: numbered lines of one file, at most 400 lines
  a call; every result is also cut to ``output_chars``.

The haystack is built once per task on the host (``PRACTICUM_HOME/data/longctx/haystacks/<key>``,
by :class:`Haystacks`, which keeps the few most recent and never removes one in use) and shown
read-only inside each episode's session at ``/haystack`` (the nsjail backend's bind); the local
backend, which cannot bind, gets a copy in its workspace. Paths are checked (no ``..``; relative
to the haystack) before any command runs. The answer key is ``Task.target``: it is never written
anywhere the episode can read.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import posixpath
import random
import shutil
import time
from pathlib import Path
from typing import Any

from practicum.domains.longctx import corpus as corpora
from practicum.domains.longctx.generators import Made, Recipe, make, render
from practicum.domains.longctx.verifier import AnswerKey, check
from practicum.envs.agent import ToolEnvironment
from practicum.envs.base import SingleTurnEnv
from practicum.errors import EnvironmentFailure, SandboxError, TaskError
from practicum.records import Message, Score, Task
from practicum.sandbox import Bind, Limits, SandboxSession, get_sandbox
from practicum.tools import Tool, ToolError, tool

ANSWER_FORMAT = "Write the final answer inside <answer></answer> tags, for example <answer>42</answer>."
INSIDE = "/haystack"
EVAL_SIZE, EVAL_SEED = 20, 1234  # the held-out set when neither the options nor the section set one
LIST_LINES, GREP_LINES, LINE_CHARS, READ_LINES = 300, 60, 300, 400


# --- tasks --------------------------------------------------------------------------------------

def task_from(made: Made, domain: str, mode: str, task_id: str, system: list[Message]) -> Task:
    p = made.problem
    docs = render(made.recipe) if mode == "in_context" else []
    if mode == "in_context":
        files = "\n".join(f'<file path="{d.path}">\n{d.text}</file>' for d in docs)
        text = (f"Below are {len(docs)} files (about {made.tokens:,} tokens). Answer the question after them "
                f"from these files alone.\n\n{files}\n\nQuestion: {p.question}\n{ANSWER_FORMAT}")
    else:
        text = (f"A repository of {len(made.recipe.paths)} files (about {made.tokens:,} tokens) is in your workspace. "
                "Use list_files, grep and read_file to find the answer, then call submit with the answer only "
                f"(no explanation).\n\nQuestion: {p.question}")
    meta: dict[str, Any] = {"kind": p.kind, "corpus": made.recipe.corpus, "mode": mode, "tokens": made.tokens,
                            "reference": _reference(p.key)}
    if mode == "agentic":
        meta["recipe"] = made.recipe.model_dump()
    return Task(id=task_id, domain=domain, prompt=[*system, Message(role="user", content=text)],
                target=p.key.model_dump(), metadata=meta)


def _reference(key: AnswerKey) -> str:
    return "\n".join(key.answer) if isinstance(key.answer, list) else str(key.answer)


class LongctxSource:
    """Tasks as a pure function of (seed, index): corpus, kind and length drawn from the options."""

    def __init__(self, domain: str, options: Any, seed: int, cache_dir: Path, system: list[Message]) -> None:
        self.domain, self.options, self.seed, self.cache_dir, self.system = domain, options, seed, cache_dir, system
        self.tag = ""  # marks the task ids of a level source (with_params)

    def task(self, seed: int, index: int, length: int | None = None) -> Task:
        o = self.options
        rng = random.Random(f"{seed}/{index}")
        corpus_name, kind = rng.choice(o.corpora), rng.choice(o.kinds)
        if length is None:
            length = (o.lengths[min(index // o.ramp_every, len(o.lengths) - 1)] if o.schedule == "ramp"
                      else rng.choice(o.lengths))
        made = make(corpora.load(corpus_name), kind, rng.randrange(2**31), length, o.distractors, self.cache_dir)
        return task_from(made, self.domain, o.mode, f"longctx{self.tag}/{corpus_name}/{kind}/{length}/{seed}-{index}",
                         self.system)

    def train_task(self, index: int) -> Task:
        return self.task(self.seed, index)

    def with_params(self, params: dict[str, Any], tag: str) -> LongctxSource:
        """The same source drawing its training tasks with ``params`` over its options: a level
        of a length curriculum (e.g. ``{lengths: [100000]}``, :mod:`practicum.curriculum.difficulty`).
        Task ids carry ``tag``; the held-out set is the base options'."""
        opts = type(self.options).model_validate({**self.options.model_dump(), **params})
        level = LongctxSource(self.domain, opts, self.seed, self.cache_dir, self.system)
        level.tag = tag
        return level

    def eval_tasks(self) -> list[Task]:
        o = self.options
        seed = EVAL_SEED if o.eval_seed is None else o.eval_seed
        n = EVAL_SIZE if o.eval_size is None else o.eval_size
        return [self.task(seed, i, o.lengths[i % len(o.lengths)]) for i in range(n)]


# --- haystack folders -----------------------------------------------------------------------------

class Haystacks:
    """Host folders of built haystacks, one per recipe, shared by a task's episodes."""

    def __init__(self, root: Path, keep: int = 8) -> None:
        self.root, self.keep = root, keep
        self.in_use: dict[str, int] = {}
        self._locks: dict[str, asyncio.Lock] = {}

    @staticmethod
    def key(recipe: Recipe) -> str:
        return hashlib.sha256(json.dumps(recipe.model_dump(), sort_keys=True).encode()).hexdigest()[:20]

    async def acquire(self, recipe: Recipe) -> Path:
        key = self.key(recipe)
        self.in_use[key] = self.in_use.get(key, 0) + 1
        async with self._locks.setdefault(key, asyncio.Lock()):
            folder = self.root / key
            if not (folder / ".complete").exists():
                await asyncio.to_thread(self.build, recipe, folder)
            folder.touch()
        self._evict()
        return folder

    def release(self, recipe: Recipe) -> None:
        key = self.key(recipe)
        self.in_use[key] -= 1
        if not self.in_use[key]:
            del self.in_use[key]

    @staticmethod
    def build(recipe: Recipe, folder: Path) -> None:
        """Write the haystack's files into ``folder`` (through a temporary folder, renamed at the end)."""
        tmp = folder.with_name(f"{folder.name}.{time.monotonic_ns()}.tmp")
        for d in render(recipe):
            p = tmp / d.path
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(d.text, encoding="utf-8")
        (tmp / ".complete").touch()
        try:
            tmp.rename(folder)
        except OSError:  # another process built it first
            shutil.rmtree(tmp, ignore_errors=True)

    def _evict(self) -> None:
        done = [p for p in self.root.glob("*") if p.is_dir() and not p.name.endswith(".tmp") and p.name not in self.in_use]
        for p in sorted(done, key=lambda p: p.stat().st_mtime)[: max(0, len(done) - self.keep)]:
            shutil.rmtree(p, ignore_errors=True)


# --- environments ---------------------------------------------------------------------------------

class InContextEnv(SingleTurnEnv):
    """Single turn: the documents are in the prompt; the first reply is the answer."""

    def __init__(self, domain: str) -> None:
        super().__init__(domain, _score_answer)


def _score_answer(task: Task, reply: str) -> tuple[Score, dict[str, Any]]:
    verdict = check(AnswerKey.model_validate(task.target), reply)
    return verdict.score, {"flags": verdict.flags}


class AgentEnv(ToolEnvironment):
    """The haystack as files in a sandbox; list_files, grep, read_file, submit (module docstring)."""

    def __init__(self, domain: str, haystacks: Haystacks, sandbox: str = "auto", tool_timeout_s: float = 5.0,
                 output_chars: int = 4000) -> None:
        super().__init__(domain)
        self.haystacks, self.sandbox_name, self.tool_timeout_s = haystacks, sandbox, tool_timeout_s
        self.max_observation_chars = output_chars
        self.session: SandboxSession | None = None
        self.recipe: Recipe | None = None
        self.root = INSIDE
        self.flags: list[str] = []

    async def setup(self, task: Task) -> None:
        try:
            self.recipe = Recipe.model_validate(task.metadata["recipe"])
        except (KeyError, ValueError) as e:
            raise EnvironmentFailure(f"task {task.id} has no usable haystack recipe: {e}") from None
        try:
            folder = await self.haystacks.acquire(self.recipe)
        except TaskError as e:
            self.recipe = None
            raise EnvironmentFailure(f"task {task.id}: {e}") from e
        limits = Limits(timeout_s=self.tool_timeout_s, cpu_s=self.tool_timeout_s, memory_mb=512, processes=16,
                        file_size_mb=1, workspace_mb=64, output_bytes=64 * 1024)
        try:
            backend = get_sandbox(self.sandbox_name)
            if backend.name == "local":  # it cannot bind: a copy in the workspace
                self.session = await backend.session(limits)
                self.root = self.session.options.workdir
                for p in sorted(folder.rglob("*")):
                    if p.is_file() and p.name != ".complete":
                        await self.session.write_file(p.relative_to(folder).as_posix(), p.read_bytes())
            else:
                self.session = await backend.session(limits, binds=[Bind(str(folder), INSIDE)])
        except SandboxError as e:
            raise EnvironmentFailure(f"task {task.id}: cannot open the sandbox: {e}") from e

    async def teardown(self) -> None:
        if self.session is not None:
            session, self.session = self.session, None
            await session.close()
        if self.recipe is not None:
            self.haystacks.release(self.recipe)
            self.recipe = None

    def make_tools(self) -> list[Tool]:
        env = self

        @tool
        async def list_files(path: str = ".") -> str:
            """List the files under a folder of the repository (recursively), with their sizes in bytes."""
            r = await env._exec(["find", env._where(path), "-type", "f", "!", "-name", ".complete", "-printf", "%p\t%s\n"])
            if r.exit_code != 0:
                raise ToolError(f"no folder {path!r}")
            rows = sorted(ln.removeprefix(env.root.rstrip("/") + "/") for ln in r.stdout.splitlines())
            more = f"\n[{len(rows) - LIST_LINES} more files; list a sub-folder]" if len(rows) > LIST_LINES else ""
            return "\n".join(rows[:LIST_LINES]) + more if rows else "(no files)"

        @tool
        async def grep(pattern: str, path: str = ".", ignore_case: bool = False, fixed: bool = False) -> str:
            """Search file contents under a path for a regular expression (grep -E syntax; fixed=True for a
            plain string). Shows matching lines as path:line:text."""
            argv = ["grep", "-rnI", "-F" if fixed else "-E", *(["-i"] if ignore_case else []), "-e", pattern, "--",
                    env._where(path)]
            r = await env._exec(argv)
            if r.status == "timeout":
                raise ToolError(f"grep took longer than {env.tool_timeout_s:g} s; use a simpler pattern or a narrower path")
            if r.exit_code == 1:
                return "no matches"
            if r.exit_code != 0:
                raise ToolError(r.stderr.strip()[:300] or f"grep failed ({r.status})")
            prefix = env.root.rstrip("/") + "/"
            lines = [ln.removeprefix(prefix) for ln in r.stdout.splitlines()]
            lines = [ln if len(ln) <= LINE_CHARS else ln[:LINE_CHARS] + " [...]" for ln in lines]
            more = (f"\n[{len(lines) - GREP_LINES}{'+' if r.truncated else ''} more matches; narrow the pattern]"
                    if len(lines) > GREP_LINES or r.truncated else "")
            return "\n".join(lines[:GREP_LINES]) + more

        @tool
        async def read_file(path: str, start_line: int = 1, num_lines: int = 200) -> str:
            """Read numbered lines of one file (at most 400 lines a call)."""
            start, count = max(1, start_line), max(1, min(num_lines, READ_LINES))
            prog = (f'NR>={start} && NR<{start + count} {{printf "%d\\t%s\\n", NR, substr($0, 1, {LINE_CHARS * 2})}} '
                    'END {printf "[%d lines in all]\\n", NR}')
            r = await env._exec(["awk", prog, env._where(path, file=True)])
            if r.exit_code != 0:
                raise ToolError(f"no file {path!r}")
            return r.stdout

        return [list_files, grep, read_file]

    def _where(self, path: str, file: bool = False) -> str:
        rel = posixpath.normpath(path.strip().lstrip("/") or ".")
        rel = rel.removeprefix(INSIDE.lstrip("/") + "/") if rel != INSIDE.lstrip("/") else "."
        if rel.split("/")[0] == ".." or "\0" in rel:
            raise ToolError(f"{path!r} is outside the repository; use paths relative to it")
        if file and rel == ".":
            raise ToolError("give a file path")
        return self.root if rel == "." else f"{self.root}/{rel}"

    async def _exec(self, argv: list[str]):  # type: ignore[no-untyped-def]
        if self.session is None:
            raise EnvironmentFailure("the episode's sandbox session is gone")
        return await self.session.exec(argv, timeout_s=self.tool_timeout_s)

    async def score(self, reason: str) -> Score:
        assert self.task is not None
        if self.submitted is None:
            self.flags = ["no_answer"]
            return Score(value=0.0, components={"correct": 0.0}, explanation=f"{reason} before submit")
        verdict = check(AnswerKey.model_validate(self.task.target), self.submitted)
        self.flags = verdict.flags
        return verdict.score

    def _info(self) -> dict[str, Any]:
        return {**super()._info(), "flags": list(self.flags)}


class LongctxDomain:
    def __init__(self, name: str, source: LongctxSource, options: Any, haystacks: Haystacks, sandbox: str) -> None:
        self._name, self._source, self.options, self.haystacks, self.sandbox = name, source, options, haystacks, sandbox

    @property
    def name(self) -> str:
        return self._name

    @property
    def source(self) -> LongctxSource:
        return self._source

    def make_env(self) -> InContextEnv | AgentEnv:
        if self.options.mode == "in_context":
            return InContextEnv(self._name)
        return AgentEnv(self._name, self.haystacks, self.sandbox, self.options.tool_timeout_s, self.options.output_chars)

    async def close(self) -> None:
        return None
