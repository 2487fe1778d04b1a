"""The code domain's task source and environments.

Environments: ``single`` — the model answers once, with code in a ```python block or bare, and
the answer is verified; ``multi`` — the shared tool machinery (:mod:`practicum.tools`,
:class:`~practicum.envs.agent.ToolEnvironment`): a ``python`` tool runs code (the model sees the
output and errors; runs share the episode's own sandbox session) and ``submit(answer)`` hands
in the function. The episode's session is closed when the episode ends. Scores are
:class:`~practicum.verify.code.CodeVerifier`'s, from sessions of their own (docs/code.md).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from practicum.domains.code.tasks import CodeTask, is_code
from practicum.domains.plugin import preamble
from practicum.envs.agent import ToolEnvironment
from practicum.envs.base import Observation, cycle_index
from practicum.errors import EnvironmentFailure, SandboxError, TaskError
from practicum.records import Message, Score, Task
from practicum.sandbox.base import SandboxSession
from practicum.tools import Tool, ToolError, tool
from practicum.verify.code import CodeTests, CodeVerifier, SessionOpener, VerifyConfig

SINGLE_TURN_SYSTEM_PROMPT = (
    "You are an expert Python programmer. Complete the function the user gives you. "
    "Reply with the complete function in one ```python code block."
)
MULTI_TURN_SYSTEM_PROMPT = (
    "You are an expert Python programmer. Complete the function the user gives you. "
    "You may run Python code with the python tool to test your ideas and see its output and errors. "
    "When you are done, call submit with the complete function as the answer."
)


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
        self.preamble = preamble(system_prompt, examples)
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
        return self._train[cycle_index(index, len(self._train), self.seed)]


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


def code_verifier(config: VerifyConfig, size: int, sessions: Callable[..., Any]) -> tuple[CodeVerifier, Any]:
    """The code domain's verifier, and the pool of the ``python`` tool, as training wires them.

    ``sessions`` is the run's pool factory (:attr:`~practicum.domains.plugin.BuildContext.sessions`).
    Solutions and the ``python`` tool take sessions from one pool; the hidden tests run only in
    sessions of a second, so a session never holds hidden tests and then runs model code.
    Verification takes two sessions per answer and multi-turn episodes one more: the pools keep
    ``size`` of them warm. A session handed back is reset (every writable folder wiped, no
    process left, nothing in memory)."""
    untrusted, graders = sessions(config.limits, size), sessions(config.limits, size)
    return CodeVerifier(untrusted, config, graders=graders), untrusted
