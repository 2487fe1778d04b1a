"""The Environment and Domain protocols: async, multi-turn, one environment per episode.

``reset(task)`` returns the first observation (the messages the model sees) and ``tools()``
the tools the episode offers (none for a plain question); ``step(text)`` takes the model's
reply and returns the next observation, or ``done`` with a :class:`Score`. A single-turn domain
is simply one whose first ``step`` is final. When a rollout limit (turns, tokens, time) ends the
episode first, ``finish(reason)`` scores the state reached, or gives no score (the episode then
scores 0). ``close()`` releases the episode's resources once, however it ended. Failures that
belong to one episode are raised as :class:`~practicum.errors.RolloutFailure` subclasses; the
rollout loop records them on the episode.

``Observation.info`` is how an environment reports details beyond the score; the rollout merges
it into :class:`~practicum.records.EpisodeInfo` (:meth:`~practicum.records.EpisodeInfo.merge`):
``tool_calls``, ``tool_errors`` and ``flags`` have fields there, any other key is kept in
``EpisodeInfo.extra``.

Every shipped environment and domain implements the whole protocol (a no-op ``finish`` or
``close`` where it has nothing to do), so callers never probe for optional methods.
"""

from __future__ import annotations

import inspect
import json
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from practicum.errors import TaskError
from practicum.records import Message, Score, Task
from practicum.tools import Tool


@dataclass
class Observation:
    messages: list[Message]  # messages to append to the conversation before the next turn
    done: bool = False
    score: Score | None = None  # set when done
    info: dict[str, Any] = field(default_factory=dict)  # merged into Episode.info (EpisodeInfo.merge)


@runtime_checkable
class Environment(Protocol):
    """One episode of one task (see the module docstring for the order of calls)."""

    domain: str

    async def reset(self, task: Task) -> Observation:
        """Start the episode: the messages the model sees first."""
        ...

    def tools(self) -> list[Tool]:
        """The tools the model may call in this episode, after ``reset``; ``[]`` for none. The
        rollout presents their schemas through the chat template, or in the system prompt."""
        ...

    async def step(self, reply: str) -> Observation:
        """Act on the model's reply: the next messages, or ``done`` with a score."""
        ...

    async def finish(self, reason: str) -> Observation:
        """A rollout limit (``turn_limit``, ``token_limit``, ``time_limit``) ended the episode:
        score the state reached, or return an observation without a score (scored 0)."""
        ...

    async def close(self) -> None:
        """Release what the episode holds; called once when it ends, however it ended."""
        ...


class TaskSource(Protocol):
    """Where a domain's tasks come from. Sampling is a pure function of (seed, index), so a
    resumed run sees exactly the tasks it would have seen, without saved iterator state."""

    domain: str

    def train_task(self, index: int) -> Task: ...

    def eval_tasks(self) -> list[Task]: ...


@runtime_checkable
class Domain(Protocol):
    """A domain plugs a task source and an environment factory together."""

    @property
    def name(self) -> str: ...

    @property
    def source(self) -> TaskSource: ...

    def make_env(self) -> Environment:
        """A fresh environment for one episode."""
        ...

    async def close(self) -> None:
        """Release what the domain keeps between episodes (warm sandbox sessions); called once,
        by whoever built the domain, when done with it."""
        ...


Scored = Score | tuple[Score, dict[str, Any]]  # what a SingleTurnEnv's score function returns


def cycle_index(index: int, n: int, seed: int) -> int:
    """Which of a fixed list of ``n`` training tasks draw ``index`` takes: every epoch visits each
    task once, in an order shuffled by ``(seed, epoch)``, so a resumed run draws the same tasks."""
    epoch, pos = divmod(index, n)
    order = list(range(n))
    random.Random(seed * 1_000_003 + epoch).shuffle(order)
    return order[pos]


class SingleTurnEnv:
    """One single-turn episode: the task's prompt, then its one reply scored by ``score``, which
    returns (or, when it is async, awaits to) the :class:`Score`, or the score and the
    ``Observation.info`` to record with it (``{"flags": [...]}``). An episode ended by a rollout limit before any reply scores 0."""

    def __init__(self, domain: str, score: Callable[[Task, str], Scored | Awaitable[Scored]]) -> None:
        self.domain = domain
        self.score = score
        self.task: Task | None = None

    async def reset(self, task: Task) -> Observation:
        self.task = task
        return Observation(messages=list(task.prompt))

    def tools(self) -> list[Tool]:
        return []

    async def step(self, reply: str) -> Observation:
        assert self.task is not None, "step() before reset()"
        scored = self.score(self.task, reply)
        if inspect.isawaitable(scored):
            scored = await scored
        score, info = scored if isinstance(scored, tuple) else (scored, {})
        return Observation(messages=[], done=True, score=score, info=info)

    async def finish(self, reason: str) -> Observation:
        return Observation(messages=[], done=True)  # no answer given: scored 0

    async def close(self) -> None:
        self.task = None


def read_jsonl(path: Path) -> list[tuple[int, Any]]:
    """The non-blank lines of a JSONL task file as ``(line number, value)``; an unreadable file
    or a line that is not JSON raises :class:`TaskError` naming the file and line."""
    try:
        lines = path.read_text().splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise TaskError(f"cannot read task file {path}: {e}") from None
    out = []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            out.append((n, json.loads(line)))
        except json.JSONDecodeError as e:
            raise TaskError(f"{path}:{n}: not valid JSON ({e.msg})") from None
        except RecursionError:
            raise TaskError(f"{path}:{n}: not valid JSON (nested too deeply)") from None
    return out
