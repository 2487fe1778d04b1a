"""The math domain's task sources and environment: single-turn problems whose answer is checked, not trusted.

Task sources:

* ``reasoning_gym``: any reasoning-gym generator (``chain_sum``, ``basic_arithmetic``, word
  problems such as ``gsm_symbolic``...), scored by the generator's own ``score_answer``.
  Held-out tasks come from a separate seed, and a training task whose question occurs in the
  held-out set is skipped, so evaluation never measures memorisation.
* ``jsonl``: free-form problems, one JSON object per line with ``question`` and ``answer``
  (LaTeX or plain), scored with ``math-verify``.

Score components: ``strict`` (the tagged answer is right), ``lenient`` (the last number is
right), ``format`` (exactly one answer tag pair). See :mod:`practicum.scoring`.

:func:`correct` and :func:`score_reply` need nothing but the task (its metadata names how it is
checked), so ``practicum verify math`` scores a task file exactly as training does.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

from practicum.domains.gym.source import ReasoningGymSource, grade
from practicum.domains.plugin import preamble
from practicum.envs.base import SingleTurnEnv, cycle_index, read_jsonl
from practicum.errors import TaskError
from practicum.records import Message, Score, Task
from practicum.scoring import RewardWeights, extract_answer

DEFAULT_SYSTEM_PROMPT = (
    "Solve the problem. Write the final answer inside <answer></answer> tags, "
    "for example <answer>42</answer>."
)


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
                    target=str(row["answer"]), metadata={"source": "jsonl", "reference": f"<answer>{row['answer']}</answer>"})

    def eval_tasks(self) -> list[Task]:
        return list(self._eval)

    def train_task(self, index: int) -> Task:

        return self._train[cycle_index(index, len(self._train), self.seed)]

    def correct(self, task: Task, answer: str | None) -> bool:
        return correct(task, answer)


def correct(task: Task, answer: str | None) -> bool:
    """Whether ``answer`` is right for a math task: by its reasoning-gym generator's own scorer,
    or by math-verify against ``task.target``."""
    if answer is None:
        return False
    if task.metadata.get("source") == "reasoning_gym":
        return grade(task, answer) >= 1.0
    from math_verify import verify

    gold = _parse_math(str(task.target))
    pred = _parse_math(answer)
    return bool(gold and pred and verify(gold, pred))


def _number(text: object) -> float | None:
    """``text`` as a finite number (``"-3"``, ``" 7.70 "``), else None."""
    try:
        x = float(str(text).strip())
    except ValueError:
        return None
    return x if math.isfinite(x) else None


def closeness(task: Task, answer: str | None, right: bool) -> float:
    """Partial credit for a tagged answer: 1 when right, else 1 / (1 + |answer - target|) when
    both are plain numbers, else 0 (no tagged number, or a target that is not one)."""
    if right:
        return 1.0
    a, t = _number(answer) if answer is not None else None, _number(task.target)
    return 0.0 if a is None or t is None else 1.0 / (1.0 + abs(a - t))


def score_reply(task: Task, reply: str, weights: RewardWeights,
                check: Callable[[Task, str | None], bool] = correct, with_closeness: bool = False) -> Score:
    """The score of one reply: ``strict``, ``lenient`` and ``format`` combined by ``weights``;
    with ``with_closeness`` also :func:`closeness`, reported, never weighed into the value."""
    ex = extract_answer(reply)
    strict = ex.strict is not None and check(task, ex.strict)
    lenient = strict or (ex.lenient is not None and check(task, ex.lenient))
    comps = {"strict": float(strict), "lenient": float(lenient), "format": float(ex.formatted)}
    value = weights.combine(comps)
    if with_closeness:
        comps["closeness"] = closeness(task, ex.strict, strict)
    why = (
        f"answer {ex.strict!r} in tags" if ex.formatted else f"no answer tags; last number {ex.lenient!r}"
    ) + f"; target {task.target!r}"
    return Score(value=value, components=comps, explanation=why)


class MathEnv(SingleTurnEnv):
    """One single-turn episode: show the problem, score the one reply."""

    def __init__(self, domain: str, source: ReasoningGymSource | JsonlMathSource, weights: RewardWeights,
                 with_closeness: bool = False) -> None:
        super().__init__(domain, lambda task, reply: score_reply(task, reply, weights, source.correct, with_closeness))
        self.source = source
        self.weights = weights


class MathDomain:
    def __init__(self, name: str, source: ReasoningGymSource | JsonlMathSource, weights: RewardWeights,
                 with_closeness: bool = False) -> None:
        self.name = name
        self.source = source
        self.weights = weights
        self.with_closeness = with_closeness

    def make_env(self) -> MathEnv:
        return MathEnv(self.name, self.source, self.weights, self.with_closeness)

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
