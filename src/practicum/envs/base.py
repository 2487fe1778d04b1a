"""The Environment protocol: async, multi-turn, one instance per episode.

``reset(task)`` returns the first observation (the messages the model sees); ``step(text)``
takes the model's reply and returns the next observation, or ``done`` with a :class:`Score`.
A single-turn domain is simply one whose first ``step`` is final. Failures that belong to one
episode are raised as :class:`~practicum.errors.RolloutFailure` subclasses; the rollout loop
records them on the episode.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from practicum.errors import TaskError
from practicum.records import Message, Score, Task


@dataclass
class Observation:
    messages: list[Message]  # messages to append to the conversation before the next turn
    done: bool = False
    score: Score | None = None  # set when done
    info: dict[str, Any] = field(default_factory=dict)
    tools: list[dict[str, Any]] | None = None  # reset only: OpenAI-style schemas of the episode's tools


@runtime_checkable
class Environment(Protocol):
    domain: str

    async def reset(self, task: Task) -> Observation: ...

    async def step(self, reply: str) -> Observation: ...

    async def close(self) -> None: ...


class TaskSource(Protocol):
    """Where a domain's tasks come from. Sampling is a pure function of (seed, index), so a
    resumed run sees exactly the tasks it would have seen, without saved iterator state."""

    domain: str

    def train_task(self, index: int) -> Task: ...

    def eval_tasks(self) -> list[Task]: ...


@runtime_checkable
class Domain(Protocol):
    """A domain plugs a task source and an environment factory together."""

    name: str
    source: TaskSource

    def make_env(self) -> Environment: ...


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
    return out
