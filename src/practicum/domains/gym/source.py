"""Tasks from a reasoning-gym generator, shared by the ``gym`` and ``math`` domains.

:class:`ReasoningGymSource` draws tasks as a pure function of (seed, index): training tasks from
the run's seed, held-out tasks from a separate seed, and a training task whose question occurs
in the held-out set is skipped, so evaluation never measures memorisation. Each task keeps the
generator's entry (JSON-safe) in ``metadata["entry"]`` for the scorer, and a reference answer
(:func:`reference_answer`) in ``metadata["reference"]``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import cache, cached_property
from typing import Any

from practicum.domains.plugin import preamble
from practicum.errors import TaskError
from practicum.records import Message, Task

_SKIP_STRIDE = 1_000_003  # offset to the next candidate when a training question is held out
# Where generators whose ``answer`` is None (any valid answer scores) keep an example of one.
EXAMPLE_KEYS = ("possible_answer", "example_answer", "example_correct_answer")


@cache
def scorer(dataset: str) -> Callable[[str, dict[str, Any]], float]:
    """The ``score_answer`` of a generator at its default configuration (for tasks read from a
    file; a source scores with its own dataset's)."""
    from reasoning_gym import get_score_answer_fn

    return get_score_answer_fn(dataset)


def reference_answer(entry: dict[str, Any]) -> str | None:
    """A reply that scores 1: the entry's answer in ``<answer>`` tags, or the example answer that
    generators with many valid answers keep in their metadata; None when there is neither."""
    answer = entry.get("answer")
    if answer is None:
        meta = entry.get("metadata") or {}
        answer = next((meta[k] for k in EXAMPLE_KEYS if meta.get(k) is not None), None)
    if answer is None:
        return None
    text = answer if isinstance(answer, str) else json.dumps(answer)
    return f"<answer>{text}</answer>"


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
            metadata={"source": "reasoning_gym", "dataset": self.dataset_name, "entry": jsonable(entry),
                      "reference": reference_answer(entry)},
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


def jsonable(entry: dict[str, Any]) -> dict[str, Any]:
    """reasoning-gym metadata holds tuples and the like; keep what JSON can carry."""
    return json.loads(json.dumps(entry, default=str))
