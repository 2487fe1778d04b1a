"""The finance task source, its single-turn environment and the domain object.

Tasks are a pure function of (seed, index): the index's random stream picks a company, a
question kind and tier allowed by the options, the latest fiscal year, the unit, and generates
the statements; a generator that does not apply to those statements, or a prompt over the token
budget, draws again from the same stream. Held-out tasks come from ``eval_seed``; a training
draw whose prompt is a held-out prompt is replaced by the next draw, so the two never share a
task.

The prompt is the document (statements as text tables, then a credit agreement excerpt where
the question needs one), the question, and how to answer. The model answers in one reply, inside
``<answer></answer>`` tags; the answer key (``Task.target``) never reaches the prompt.

Prompts are kept within ``max_prompt_tokens`` (default 3,000, so that the embedded 8,192-token
model has room to answer) by an estimate that needs no tokenizer: each digit and each ``|`` one
token, other characters one token per 3.2 (SmolLM2's tokenizer splits digits one by one; tests check the
estimate against it). Over budget, the statements the question does not read are left out; if
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
from practicum.envs.base import Observation
from practicum.errors import TaskError
from practicum.records import Message, Task
from practicum.tools import Tool

EVAL_SIZE, EVAL_SEED = 50, 4321  # the held-out set when neither the options nor the section set one
DEFAULT_SYSTEM_PROMPT = ("You are a financial analyst. Read the documents and answer the question; work step by step "
                         "if it helps, then give the final answer inside <answer></answer> tags.")
MAX_DRAWS = 50
NEEDS: dict[str, tuple[Statement, ...]] = {  # the statements each kind reads, when the prompt must be cut
    "margin": ("income", "cash_flow"), "ratio": ("income", "balance", "cash_flow"), "growth": ("income",),
    "working_capital": ("balance", "cash_flow"), "tvm": ("cash_flow",), "covenant": ("income", "balance"),
    "inconsistency": ("income", "balance", "cash_flow"),
}


def estimate_tokens(text: str) -> int:
    digits = sum(ch.isdigit() for ch in text)
    pipes = text.count("|")  # Markdown table rules: a token each
    return digits + pipes + int((len(text) - digits - pipes) / 3.2) + 1


def answer_format(key: AnswerKey) -> str:
    if len(key.parts) == 1:
        return "Write only the final answer inside <answer></answer> tags, for example <answer>12.3</answer>."
    lines = "\n".join(f"({p.label}) ..." for p in key.parts)
    return ("Inside the <answer></answer> tags, write one line per part, labelled as in the question:\n"
            f"<answer>\n{lines}\n</answer>")


def prompt_text(q: Question, fmt: str, statements: tuple[Statement, ...] | None = None) -> str:
    blocks = []
    if q.statements is not None:
        blocks.append(render(q.statements, fmt, statements or ("income", "balance", "cash_flow")))  # type: ignore[arg-type]
    if q.agreement:
        blocks.append(q.agreement)
    blocks.append(f"Question: {q.text}\n{answer_format(q.key)}")
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
            text = prompt_text(q, o.format)
            if self.tokens(text) > o.max_prompt_tokens or o.statements == "needed":
                text = prompt_text(q, o.format, NEEDS[kind])
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


class FinanceEnv:
    """One single-turn episode: the documents and the question; the first reply is the answer."""

    def __init__(self, domain: str, scorer: Scorer = score_generated) -> None:
        self.domain, self.scorer = domain, scorer
        self.task: Task | None = None

    async def reset(self, task: Task) -> Observation:
        self.task = task
        return Observation(messages=list(task.prompt))

    def tools(self) -> list[Tool]:
        return []

    async def step(self, reply: str) -> Observation:
        assert self.task is not None, "step() before reset()"
        verdict = await self.scorer(self.task, reply)
        return Observation(messages=[], done=True, score=verdict.score, info={"flags": verdict.flags})

    async def finish(self, reason: str) -> Observation:
        return Observation(messages=[], done=True)  # no answer: scored 0

    async def close(self) -> None:
        self.task = None


class FinanceDomain:
    def __init__(self, name: str, source: Any, make_env: Any) -> None:
        self._name, self._source, self._make_env = name, source, make_env

    @property
    def name(self) -> str:
        return self._name

    @property
    def source(self) -> Any:
        return self._source

    def make_env(self) -> Any:
        return self._make_env()

    async def close(self) -> None:
        return None
