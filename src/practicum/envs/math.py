"""The math domain: single-turn problems whose answer is checked, not trusted.

Task sources:

* ``reasoning_gym``: any reasoning-gym generator (``chain_sum``, ``basic_arithmetic``, word
  problems such as ``gsm_symbolic``...), scored by the generator's own ``score_answer``.
  Held-out tasks come from a separate seed, and a training task whose question occurs in the
  held-out set is skipped, so evaluation never measures memorisation.
* ``jsonl``: free-form problems, one JSON object per line with ``question`` and ``answer``
  (LaTeX or plain), scored with ``math-verify``.

Score components: ``strict`` (the tagged answer is right), ``lenient`` (the last number is
right), ``format`` (exactly one answer tag pair). See :mod:`practicum.scoring`.
"""

from __future__ import annotations

import json
from functools import cached_property
from pathlib import Path
from typing import Any

from practicum.envs.base import Observation, read_jsonl
from practicum.errors import TaskError
from practicum.records import Message, Score, Task
from practicum.scoring import RewardWeights, extract_answer
from practicum.tools import Tool

DEFAULT_SYSTEM_PROMPT = (
    "Solve the problem. Write the final answer inside <answer></answer> tags, "
    "for example <answer>42</answer>."
)
_SKIP_STRIDE = 1_000_003  # offset to the next candidate when a training question is held out


def preamble(system_prompt: str, examples: list[tuple[str, str]] | None) -> list[Message]:
    """The messages before the question: the system prompt, then worked examples as earlier
    user/assistant turns (few-shot)."""
    out = [Message(role="system", content=system_prompt)] if system_prompt else []
    for question, reply in examples or []:
        out += [Message(role="user", content=question), Message(role="assistant", content=reply)]
    return out


class ReasoningGymSource:
    """Tasks from a reasoning-gym generator; a pure function of (seed, index)."""

    def __init__(
        self,
        domain: str,
        dataset: str,
        params: dict[str, Any],
        system_prompt: str,
        seed: int,
        eval_seed: int,
        eval_size: int,
        examples: list[tuple[str, str]] | None = None,
    ) -> None:
        import reasoning_gym

        if dataset not in reasoning_gym.factory.DATASETS:
            raise TaskError(f"reasoning-gym has no generator {dataset!r}")
        self.domain = domain
        self.dataset_name = dataset
        self.preamble = preamble(system_prompt, examples)
        self.seed = seed
        self.eval_seed = eval_seed
        self.eval_size = eval_size
        try:
            self.train_ds = reasoning_gym.create_dataset(dataset, seed=seed, size=10**9, **params)
            self.eval_ds = reasoning_gym.create_dataset(dataset, seed=eval_seed, size=10**9, **params)
        except (TypeError, AssertionError, ValueError) as e:
            raise TaskError(f"reasoning-gym {dataset!r} rejects params {params}: {e}") from e

    def _task(self, entry: dict[str, Any], split: str, index: int) -> Task:
        prompt = [*self.preamble, Message(role="user", content=entry["question"])]
        return Task(
            id=f"{self.dataset_name}/{split}/{index}",
            domain=self.domain,
            prompt=prompt,
            target=entry["answer"],
            metadata={"source": "reasoning_gym", "dataset": self.dataset_name, "entry": _jsonable(entry)},
        )

    @cached_property
    def _eval_entries(self) -> list[tuple[int, dict[str, Any]]]:
        seen: set[str] = set()
        out = []
        i = 0
        while len(out) < self.eval_size and i < self.eval_size * 50:
            e = self.eval_ds[i]
            if e["question"] not in seen:
                seen.add(e["question"])
                out.append((i, e))
            i += 1
        return out

    @cached_property
    def held_out_questions(self) -> frozenset[str]:
        return frozenset(e["question"] for _, e in self._eval_entries)

    def eval_tasks(self) -> list[Task]:
        return [self._task(e, "eval", i) for i, e in self._eval_entries]

    def train_task(self, index: int) -> Task:
        for attempt in range(1000):
            j = index + attempt * _SKIP_STRIDE
            entry = self.train_ds[j]
            if entry["question"] not in self.held_out_questions:
                return self._task(entry, "train", j)
        raise TaskError(f"{self.dataset_name}: every candidate training task is in the held-out set")

    def correct(self, task: Task, answer: str | None) -> bool:
        if answer is None:
            return False
        entry = task.metadata["entry"]
        return float(self.train_ds.score_answer(answer, entry)) >= 1.0


class JsonlMathSource:
    """Free-form math problems from a JSONL file, scored with math-verify."""

    def __init__(self, domain: str, path: Path, system_prompt: str, seed: int, eval_fraction: float,
                 examples: list[tuple[str, str]] | None = None) -> None:
        self.domain = domain
        self.preamble = preamble(system_prompt, examples)
        self.seed = seed
        rows = []
        for n, row in read_jsonl(path):
            if not isinstance(row, dict) or not isinstance(row.get("question"), str) or "answer" not in row:
                raise TaskError(f"{path}:{n}: each line needs a string 'question' and an 'answer'")
            rows.append(row)
        if not rows:
            raise TaskError(f"{path}: no tasks")
        n_eval = int(len(rows) * eval_fraction)
        self._eval = [self._task(r, "eval", i) for i, r in enumerate(rows[:n_eval])]
        self._train = [self._task(r, "train", i) for i, r in enumerate(rows[n_eval:])] or self._eval

    def _task(self, row: dict[str, Any], split: str, i: int) -> Task:
        prompt = [*self.preamble, Message(role="user", content=row["question"])]
        return Task(id=str(row.get("id", f"{split}/{i}")), domain=self.domain, prompt=prompt,
                    target=str(row["answer"]), metadata={"source": "jsonl"})

    def eval_tasks(self) -> list[Task]:
        return list(self._eval)

    def train_task(self, index: int) -> Task:
        import random

        epoch, pos = divmod(index, len(self._train))
        order = list(range(len(self._train)))
        random.Random(self.seed * 1_000_003 + epoch).shuffle(order)
        return self._train[order[pos]]

    def correct(self, task: Task, answer: str | None) -> bool:
        if answer is None:
            return False
        from math_verify import verify

        gold = _parse_math(str(task.target))
        pred = _parse_math(answer)
        return bool(gold and pred and verify(gold, pred))


class MathEnv:
    """One single-turn episode: show the problem, score the one reply."""

    def __init__(self, domain: str, source: ReasoningGymSource | JsonlMathSource, weights: RewardWeights) -> None:
        self.domain = domain
        self.source = source
        self.weights = weights
        self.task: Task | None = None

    async def reset(self, task: Task) -> Observation:
        self.task = task
        return Observation(messages=list(task.prompt))

    def tools(self) -> list[Tool]:
        return []

    async def step(self, reply: str) -> Observation:
        assert self.task is not None, "step() before reset()"
        ex = extract_answer(reply)
        strict = ex.strict is not None and self.source.correct(self.task, ex.strict)
        lenient = strict or (ex.lenient is not None and self.source.correct(self.task, ex.lenient))
        comps = {"strict": float(strict), "lenient": float(lenient), "format": float(ex.formatted)}
        why = (
            f"answer {ex.strict!r} in tags" if ex.formatted else f"no answer tags; last number {ex.lenient!r}"
        ) + f"; target {self.task.target!r}"
        return Observation(messages=[], done=True, score=Score(value=self.weights.combine(comps), components=comps, explanation=why))

    async def finish(self, reason: str) -> Observation:
        return Observation(messages=[], done=True)  # no answer given: scored 0

    async def close(self) -> None:
        return None


class MathDomain:
    def __init__(self, name: str, source: ReasoningGymSource | JsonlMathSource, weights: RewardWeights) -> None:
        self.name = name
        self.source = source
        self.weights = weights

    def make_env(self) -> MathEnv:
        return MathEnv(self.name, self.source, self.weights)

    async def close(self) -> None:
        return None


def _parse_math(text: str) -> list:
    """Parse an answer with math-verify. Bare LaTeX (``2\\sqrt{3}``) is only read as LaTeX
    inside math delimiters, so wrap it; fall back to a plain parse."""
    from math_verify import parse

    text = text.strip()
    if not any(d in text for d in ("$", "\\(", "\\[")):
        parsed = parse(f"${text}$")
        if parsed:
            return parsed
    return parse(text)


def _jsonable(entry: dict[str, Any]) -> dict[str, Any]:
    """reasoning-gym metadata holds tuples and the like; keep what JSON can carry."""
    return json.loads(json.dumps(entry, default=str))
