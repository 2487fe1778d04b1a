"""A toy domain for tests and demos: "say seven", scored by how much of the reply is "seven".

The task asks the model to repeat one target word; the score is the fraction of the reply's
words that equal the target (0 for an empty reply). The score is graded, so the episodes of a
group differ and GRPO has signal even for an untrained model, and it rewards the model for
reading the prompt when there are several targets. With ``turns > 1`` the environment asks
again after each reply, and the score is the mean over turns: a multi-turn episode whose
context grows by environment messages, which exercises the loss mask.

Every word the domain writes is in the vocabulary of :func:`practicum.testing.make_tiny_model`.
Tasks are pure functions of (seed, index). The task space is tiny, so the evaluation set is not
disjoint from training: this domain measures whether the loop learns, not generalisation.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from practicum.envs.base import Observation
from practicum.records import Message, Score, Task
from practicum.tools import Tool

DEFAULT_TARGETS = ("seven", "three")


def word_score(reply: str, target: str) -> float:
    """Fraction of the whitespace-separated words of ``reply`` equal to ``target``."""
    words = reply.split()
    if not words:
        return 0.0
    return sum(w == target for w in words) / len(words)


class ToySource:
    """Tasks "say WORD" for WORD drawn from ``targets``; a pure function of (seed, index)."""

    def __init__(self, domain: str = "toy", targets: Sequence[str] = DEFAULT_TARGETS, seed: int = 0,
                 eval_size: int = 8) -> None:
        if not targets:
            raise ValueError("the toy domain needs at least one target word")
        self.domain = domain
        self.targets = tuple(targets)
        self.seed = seed
        self.eval_size = eval_size

    def _task(self, target: str, split: str, index: int) -> Task:
        return Task(
            id=f"{self.domain}/{split}/{index}",
            domain=self.domain,
            prompt=[Message(role="user", content=f"say {target}")],
            target=target,
            metadata={"source": "toy"},
        )

    def train_task(self, index: int) -> Task:
        rng = random.Random(self.seed * 1_000_003 + index)
        return self._task(rng.choice(self.targets), "train", index)

    def eval_tasks(self) -> list[Task]:
        # cycle through the targets so every target is evaluated equally often
        return [self._task(self.targets[i % len(self.targets)], "eval", i) for i in range(self.eval_size)]


class ToyEnv:
    """One episode of "say WORD", over ``turns`` model turns."""

    def __init__(self, domain: str = "toy", turns: int = 1) -> None:
        self.domain = domain
        self.turns = turns
        self.task: Task | None = None
        self.scores: list[float] = []

    async def reset(self, task: Task) -> Observation:
        self.task = task
        self.scores = []
        return Observation(messages=list(task.prompt))

    def tools(self) -> list[Tool]:
        return []

    async def step(self, reply: str) -> Observation:
        assert self.task is not None, "step() before reset()"
        target = str(self.task.target)
        self.scores.append(word_score(reply, target))
        if len(self.scores) < self.turns:
            return Observation(messages=[Message(role="user", content=f"please say {target}")])
        value = sum(self.scores) / len(self.scores)
        comps = {"hit": value, "exact": float(reply.split() == [target])}
        return Observation(messages=[], done=True, score=Score(value=value, components=comps,
                                                               explanation=f"{value:.2f} of the words were {target!r}"))

    async def finish(self, reason: str) -> Observation:
        return Observation(messages=[], done=True)  # the turns were not all answered: scored 0

    async def close(self) -> None:
        return None


class ToyDomain:
    """The toy domain: a :class:`ToySource` and :class:`ToyEnv` factory."""

    def __init__(self, name: str = "toy", targets: Sequence[str] = DEFAULT_TARGETS, seed: int = 0,
                 eval_size: int = 8, turns: int = 1) -> None:
        self.name = name
        self.source = ToySource(name, targets, seed, eval_size)
        self.turns = turns

    def make_env(self) -> ToyEnv:
        return ToyEnv(self.name, self.turns)

    async def close(self) -> None:
        return None
