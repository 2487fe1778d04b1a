"""The finance task source, its single-turn environment and the domain object.

Tasks are a pure function of (seed, index): the index's random stream picks a company, a
question kind and tier allowed by the options, the latest fiscal year, the unit, and generates
the statements; a generator that does not apply to those statements, or a prompt over the token
budget, draws again from the same stream. Held-out tasks come from ``eval_seed``; a training
draw whose prompt is a held-out prompt is replaced by the next draw, so the two never share a
task.

The prompt is the document (statements as text tables, then a credit agreement excerpt where
the question needs one), the question, and how to answer. In ``single`` mode (the default) the
model answers in one reply, inside ``<answer></answer>`` tags (:class:`FinanceEnv`); in ``multi``
mode it may run Python in a sandbox session with a ``python`` tool and hands in its answer with
``submit`` (:class:`FinanceToolEnv`). The answer key (``Task.target``) never reaches the prompt
or the sandbox.

Prompts are kept within ``max_prompt_tokens`` (default 3,000, so that the embedded 8,192-token
model has room to answer) by an estimate that needs no tokenizer: each digit one token, each
``|`` two, each ``<``, ``>``, ``"``, ``=`` one, other characters one per 3.2 (SmolLM2's tokenizer
splits numbers into single digits; tests check the estimate against it). Over budget, the statements the question does not read are left out; if
it still does not fit, the task is drawn again.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Awaitable, Callable
from typing import Any

from practicum.domains.finance.companies import companies
from practicum.domains.finance.questions import GENERATORS, NotApplicable, Question
from practicum.domains.finance.render import render
from practicum.domains.finance.statements import Statement, generate
from practicum.domains.finance.verifier import AnswerKey, check
from practicum.domains.plugin import Verdict
from practicum.envs.agent import ToolEnvironment
from practicum.envs.base import SingleTurnEnv
from practicum.errors import EnvironmentFailure, SandboxError, TaskError
from practicum.records import Message, Score, Task
from practicum.sandbox import Limits
from practicum.tools import Tool, ToolError, tool

EVAL_SIZE, EVAL_SEED = 50, 4321  # the held-out set when neither the options nor the section set one
DEFAULT_SYSTEM_PROMPT = ("You are a financial analyst. Read the documents and answer the question; work step by step "
                         "if it helps, then give the final answer inside <answer></answer> tags.")
MULTI_SYSTEM_PROMPT = ("You are a financial analyst. Read the documents and answer the question. You may run Python "
                       "with the python tool (print what you want to see; the standard library is there) to do the "
                       "arithmetic. When you are done, call submit with the final answer only, in the form the "
                       "question asks for.")
MAX_DRAWS = 50
NEEDS: dict[str, tuple[Statement, ...]] = {  # the statements each kind reads, when the prompt must be cut
    "margin": ("income", "cash_flow"), "ratio": ("income", "balance", "cash_flow"), "growth": ("income",),
    "working_capital": ("balance", "cash_flow"), "tvm": ("cash_flow",), "covenant": ("income", "balance"),
    "inconsistency": ("income", "balance", "cash_flow"),
}


def estimate_tokens(text: str) -> int:
    digits = sum(ch.isdigit() for ch in text)
    pipes = text.count("|")  # a Markdown cell border: about two tokens with its spaces
    markup = sum(text.count(ch) for ch in '<>"=')  # inline XBRL's tags and attributes
    return digits + 2 * pipes + markup + int((len(text) - digits - pipes - markup) / 3.2) + 1


def answer_format(key: AnswerKey, mode: str = "single") -> str:
    if mode == "multi":
        if len(key.parts) == 1:
            return "When you are done, call submit with the final answer only, for example 12.3."
        lines = "\n".join(f"({p.label}) ..." for p in key.parts)
        return f"When you are done, call submit with one line per part, labelled as in the question:\n{lines}"
    if len(key.parts) == 1:
        return "Write only the final answer inside <answer></answer> tags, for example <answer>12.3</answer>."
    lines = "\n".join(f"({p.label}) ..." for p in key.parts)
    return ("Inside the <answer></answer> tags, write one line per part, labelled as in the question:\n"
            f"<answer>\n{lines}\n</answer>")


def prompt_text(q: Question, fmt: str, statements: tuple[Statement, ...] | None = None, mode: str = "single") -> str:
    blocks = []
    if q.statements is not None:
        blocks.append(render(q.statements, fmt, statements or ("income", "balance", "cash_flow")))  # type: ignore[arg-type]
    if q.agreement:
        blocks.append(q.agreement)
    blocks.append(f"Question: {q.text}\n{answer_format(q.key, mode)}")
    return "\n\n".join(blocks)


def fingerprint(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


class FinanceSource:
    """Generated tasks: a pure function of (seed, index) under the options."""

    def __init__(self, domain: str, options: Any, seed: int, system: list[Message]) -> None:
        self.domain, self.options, self.seed, self.system = domain, options, seed, system
        self.pairs = [(k, t) for (k, t) in GENERATORS if k in options.kinds and t in options.tiers]
        if not self.pairs:
            raise TaskError(f"no finance questions of kinds {options.kinds} at tiers {options.tiers}; "
                            f"the pairs there are: {', '.join(f'{k}/{t}' for k, t in GENERATORS)}")
        self._eval: list[Task] | None = None
        self._system_tokens = sum(estimate_tokens(m.content) + 4 for m in system)

    def tokens(self, text: str) -> int:
        """The estimated tokens of a prompt: the system messages and worked examples, and ``text``."""
        return self._system_tokens + estimate_tokens(text)

    def draw(self, seed: int, index: int, attempt: int = 0) -> Task:
        """Task ``index`` of the stream ``seed``; ``attempt`` > 0 draws a replacement."""
        o = self.options
        for n in range(attempt * MAX_DRAWS, (attempt + 1) * MAX_DRAWS):
            rng = random.Random(f"finance/{seed}/{index}/{n}")
            kind, tier = rng.choice(self.pairs)
            company = rng.choice(companies())
            fin = generate(rng, company, o.years, rng.randint(*o.fiscal_years), rng.choice(o.scales))
            try:
                q = GENERATORS[(kind, tier)](rng, fin)
            except NotApplicable:
                continue
            text = prompt_text(q, o.format, mode=o.mode)
            if self.tokens(text) > o.max_prompt_tokens or o.statements == "needed":
                text = prompt_text(q, o.format, NEEDS[kind], o.mode)
                if self.tokens(text) > o.max_prompt_tokens:
                    continue
            return self._task(q, text, f"finance/{kind}/{tier}/{q.name}/{seed}-{index}" + (f"-{n}" if n else ""))
        raise TaskError(f"finance: no task fits the options after {MAX_DRAWS} draws (seed {seed}, index {index}); "
                        "raise max_prompt_tokens, lower years, or allow more kinds")

    def _task(self, q: Question, text: str, task_id: str) -> Task:
        fin = q.statements
        meta: dict[str, Any] = {"kind": q.kind, "tier": q.tier, "question": q.name, "reference": q.key.reference(),
                                "tokens_estimate": self.tokens(text), "fingerprint": fingerprint(text)}
        if fin is not None:
            meta.update(company=fin.company.ticker, cik=fin.company.cik, years=fin.years, scale=fin.scale)
        return Task(id=task_id, domain=self.domain, prompt=[*self.system, Message(role="user", content=text)],
                    target=q.key.model_dump(), metadata=meta)

    def eval_tasks(self) -> list[Task]:
        if self._eval is None:
            o = self.options
            self._eval = [self.draw(o.eval_seed, i) for i in range(o.eval_size)]
        return list(self._eval)

    def _held_out(self) -> set[str]:
        return {t.metadata["fingerprint"] for t in self.eval_tasks()}

    def train_task(self, index: int) -> Task:
        held = self._held_out()
        for attempt in range(10):
            task = self.draw(self.seed, index, attempt)
            if task.metadata["fingerprint"] not in held:
                return task
        raise TaskError(f"finance: training task {index} keeps repeating held-out tasks")  # pragma: no cover


Scorer = Callable[[Task, str], Awaitable[Verdict]]


async def score_generated(task: Task, reply: str) -> Verdict:
    return check(AnswerKey.model_validate(task.target), reply)


class FinanceEnv(SingleTurnEnv):
    """One single-turn episode: the documents and the question; the first reply is the answer."""

    def __init__(self, domain: str, scorer: Scorer = score_generated) -> None:
        async def score(task: Task, reply: str) -> tuple[Score, dict[str, Any]]:
            verdict = await scorer(task, reply)
            return verdict.score, {"flags": verdict.flags}

        super().__init__(domain, score)
        self.scorer = scorer


class FinanceToolEnv(ToolEnvironment):
    """A multi-turn episode: a ``python`` tool runs the model's code in a sandbox session (its
    output and errors come back, cut to ``output_chars``; at most ``max_runs`` runs), and
    ``submit(answer)`` hands in the answer, scored as a single-turn reply is. An episode that ends
    at a limit without submitting scores 0."""

    def __init__(self, domain: str, scorer: Scorer, sessions: Any, max_runs: int = 6, run_timeout_s: float = 5.0,
                 output_chars: int = 1500) -> None:
        super().__init__(domain)
        self.scorer, self.sessions, self.max_runs, self.run_timeout_s = scorer, sessions, max_runs, run_timeout_s
        self.max_observation_chars = output_chars
        self.session: Any = None
        self.runs = 0
        self.flags: list[str] = []

    def make_tools(self) -> list[Tool]:
        env = self

        @tool
        async def python(code: str) -> str:
            """Run Python code in your sandbox and see what it prints, and its errors."""
            if env.runs >= env.max_runs:
                raise ToolError(f"you have used all {env.max_runs} runs; call submit with your answer")
            env.runs += 1
            try:
                if env.session is None:
                    env.session = await env.sessions.session(RUN_LIMITS)
                res = await env.session.run_python(code, timeout_s=env.run_timeout_s)
            except SandboxError as e:
                raise EnvironmentFailure(f"the python tool failed: {e}") from e
            head = {"ok": f"exit code {res.exit_code}", "timeout": f"timed out after {env.run_timeout_s:g} s",
                    "memory": "killed: out of memory"}.get(res.status, f"{res.status}: {res.detail}")
            out = (f"\nstdout:\n{res.stdout}" if res.stdout else "") + (f"\nstderr:\n{res.stderr}" if res.stderr else "")
            return head + (out or "\n(no output: print what you want to see)")

        return [python]

    async def score(self, reason: str) -> Score:
        assert self.task is not None
        if self.submitted is None:
            self.flags = ["no_answer"]
            return Score(value=0.0, components={"correct": 0.0, "credit": 0.0}, explanation=f"{reason} before submit")
        verdict = await self.scorer(self.task, self.submitted)
        self.flags = verdict.flags
        return verdict.score

    def _info(self) -> dict[str, Any]:
        return {**super()._info(), "flags": list(self.flags)}

    async def teardown(self) -> None:
        if self.session is not None:
            session, self.session = self.session, None
            await session.close()


RUN_LIMITS = Limits(timeout_s=5.0, cpu_s=5.0, memory_mb=512, processes=16, file_size_mb=4, workspace_mb=16,
                    output_bytes=16 * 1024)


class FinanceDomain:
    def __init__(self, name: str, source: Any, make_env: Any, pool: Any = None) -> None:
        self._name, self._source, self._make_env, self.pool = name, source, make_env, pool

    @property
    def name(self) -> str:
        return self._name

    @property
    def source(self) -> Any:
        return self._source

    def make_env(self) -> Any:
        return self._make_env()

    async def close(self) -> None:
        """Close the python tool's warm sandbox sessions (multi mode)."""
        if self.pool is not None:
            await self.pool.close()
