"""Tasks from a reasoning-gym generator, shared by the ``gym`` and ``math`` domains.

:class:`ReasoningGymSource` draws tasks as a pure function of (seed, index): training tasks from
the run's seed, held-out tasks from a separate seed, and a training task whose question occurs
in the held-out set is skipped, so evaluation never measures memorisation. Each task keeps the
generator's entry (JSON-safe) in ``metadata["entry"]``, how to draw it again in
``metadata["draw"]`` (seed, size, params, index), and a reference answer
(:func:`reference_answer`) in ``metadata["reference"]``.

:func:`grade` scores an answer against the generator's *own* entry, drawn again: the JSON copy
loses tuples, and some scorers (arc_agi, rearc) compare them (a right grid scored 0.05 from the
copy). A task file that gives only the entry is graded from the copy.
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


@cache
def _dataset(dataset: str, seed: int, size: int, params: str) -> Any:
    import reasoning_gym

    return reasoning_gym.create_dataset(dataset, seed=seed, size=size, **json.loads(params))


def drawn_entry(dataset: str, draw: dict[str, Any]) -> dict[str, Any]:
    """The generator's own entry that ``metadata["draw"]`` describes, drawn again."""
    ds = _dataset(dataset, int(draw["seed"]), int(draw["size"]), json.dumps(draw.get("params", {}), sort_keys=True))
    return ds[int(draw["index"])]


def grade(task: Task, answer: str, source: ReasoningGymSource | None = None) -> float:
    """The generator's score of ``answer`` for a reasoning-gym task, in [0, 1]: against its own
    entry (from ``source`` when given, else drawn again), or the JSON copy when the task holds
    only that."""
    meta = task.metadata
    if source is not None:
        score_answer, entry = source.train_ds.score_answer, source.entry(task)
    else:
        score_answer = scorer(meta["dataset"])
        entry = drawn_entry(meta["dataset"], meta["draw"]) if "draw" in meta else meta["entry"]
    return min(1.0, max(0.0, float(score_answer(answer, entry))))


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
        size: int = 10**9,
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
        # A generator makes task i of a dataset of ``size`` on demand; a few (acre, gsm_symbolic,
        # list_functions) build all ``size`` up front, and word_ladder refuses more than 20,000.
        self.size = size
        self.params = params
        self.tag = ""  # marks the task ids of a level source (with_params), so they never collide with the base's
        self.eval_candidates = min(size, eval_size * 50)
        try:
            self.train_ds = reasoning_gym.create_dataset(dataset, seed=seed, size=size, **params)
            self.eval_ds = reasoning_gym.create_dataset(dataset, seed=eval_seed, size=self.eval_candidates, **params)
        except (TypeError, AssertionError, ValueError) as e:
            raise TaskError(f"reasoning-gym {dataset!r} rejects params {params}: {e}") from e

    def _task(self, entry: dict[str, Any], split: str, index: int) -> Task:
        prompt = [*self.preamble, Message(role="user", content=entry["question"])]
        return Task(
            id=f"{self.dataset_name}{self.tag}/{split}/{index}",
            domain=self.domain,
            prompt=prompt,
            target=entry["answer"],
            metadata={"source": "reasoning_gym", "dataset": self.dataset_name, "entry": jsonable(entry),
                      "draw": self._draw(split, index), "reference": reference_answer(entry)},
        )

    def _draw(self, split: str, index: int) -> dict[str, Any]:
        seed, size = (self.seed, self.size) if split == "train" else (self.eval_seed, self.eval_candidates)
        return {"seed": seed, "size": size, "params": jsonable(self.params), "index": index}

    def entry(self, task: Task) -> dict[str, Any]:
        """The generator's own entry of one of this source's tasks (a task of one of its level
        sources, drawn at other parameters, is drawn again from its ``metadata["draw"]``)."""
        draw = task.metadata["draw"]
        if draw.get("params", {}) != jsonable(self.params):
            return drawn_entry(self.dataset_name, draw)
        return (self.train_ds if draw["seed"] == self.seed and draw["size"] == self.size else self.eval_ds)[draw["index"]]

    def with_params(self, params: dict[str, Any], tag: str) -> ReasoningGymSource:
        """The same source generating its training tasks with ``params`` over its own (a level of
        a curriculum, :mod:`practicum.curriculum.difficulty`). Task ids carry ``tag``; the held-out
        set stays the base parameters' (and stays out of training)."""
        import copy

        import reasoning_gym

        merged = {**self.params, **params}
        level = copy.copy(self)
        level.params, level.tag = merged, tag
        try:
            level.train_ds = reasoning_gym.create_dataset(self.dataset_name, seed=self.seed, size=self.size, **merged)
        except (TypeError, AssertionError, ValueError) as e:
            raise TaskError(f"reasoning-gym {self.dataset_name!r} rejects level params {merged}: {e}") from e
        return level

    @cached_property
    def _eval_entries(self) -> list[tuple[int, dict[str, Any]]]:
        seen: set[str] = set()
        out: list[tuple[int, dict[str, Any]]] = []
        i = 0
        while len(out) < self.eval_size and i < self.eval_candidates:
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
            j = (index + attempt * _SKIP_STRIDE) % self.size
            entry = self.train_ds[j]
            if entry["question"] not in self.held_out_questions:
                return self._task(entry, "train", j)
        raise TaskError(f"{self.dataset_name}: every candidate training task is in the held-out set")

    def correct(self, task: Task, answer: str | None) -> bool:
        return answer is not None and grade(task, answer, self) >= 1.0


def jsonable(entry: dict[str, Any]) -> dict[str, Any]:
    """reasoning-gym metadata holds tuples and the like; keep what JSON can carry."""
    return json.loads(json.dumps(entry, default=str))
