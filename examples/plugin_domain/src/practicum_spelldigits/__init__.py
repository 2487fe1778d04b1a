"""``spelldigits``: spell digits as words. A third-party Practicum domain in one file.

Task: ``say 7 3 1`` -> the model should reply ``seven three one``. Tasks are a pure function of
(seed, index), held-out ones drawn from the section's ``eval_seed``.

Verifier: the reply's words are compared with the expected words position by position.
Components: ``words`` (fraction of positions right: the score) and ``exact`` (all right and
nothing else). A reply longer than asked gets the flag ``extra_words`` and loses the surplus as
wrong positions (so repeating every number word cannot score).

Options (``options:`` of a domain section): ``min_digits``, ``max_digits``.
Task file (``practicum verify spelldigits``): ``{"digits": "731"}`` (optional ``id``); the answer
file holds the reply.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from pydantic import Field, ValidationError, model_validator

from practicum.domains.plugin import BuildContext, Options, Verdict, preamble, read_task_json, section_prompt
from practicum.envs.base import SingleTurnEnv
from practicum.errors import TaskError
from practicum.records import Message, Score, Task

WORDS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")


class SpellOptions(Options):
    min_digits: int = Field(1, ge=1, le=9, description="Fewest digits in a task.")
    max_digits: int = Field(3, ge=1, le=9, description="Most digits in a task.")

    @model_validator(mode="after")
    def _order(self) -> SpellOptions:
        if self.min_digits > self.max_digits:
            raise ValueError("min_digits must not exceed max_digits")
        return self


class SpellTaskFile(Options):
    digits: str = Field(..., pattern=r"^[0-9]{1,9}$", description="The digits to spell, e.g. '731'.")
    id: str | None = None


def make_task(domain: str, digits: str, head: list[Message], task_id: str) -> Task:
    words = [WORDS[int(d)] for d in digits]
    return Task(id=task_id, domain=domain, prompt=[*head, Message(role="user", content="say " + " ".join(digits))],
                target=words, metadata={"reference": " ".join(words)})


def check(expected: list[str], reply: str) -> Verdict:
    """Word-by-word comparison; extra words count as wrong positions and are flagged."""
    got = reply.split()
    right = sum(a == b for a, b in zip(got, expected))
    positions = max(len(expected), len(got))
    words = right / positions if positions else 0.0
    exact = float(got == expected)
    flags = ["extra_words"] if len(got) > len(expected) else []
    why = f"{right} of {len(expected)} words right" + (f", {len(got) - len(expected)} extra" if flags else "")
    return Verdict(Score(value=words, components={"words": words, "exact": exact}, explanation=why), flags)


class SpellSource:
    def __init__(self, domain: str, options: SpellOptions, seed: int, eval_seed: int, eval_size: int,
                 head: list[Message]) -> None:
        self.domain, self.options, self.seed, self.head = domain, options, seed, head
        self._eval = [self._task(eval_seed, i, "eval") for i in range(eval_size)]

    def _task(self, seed: int, index: int, split: str) -> Task:
        rng = random.Random(seed * 1_000_003 + index)
        n = rng.randint(self.options.min_digits, self.options.max_digits)
        digits = "".join(rng.choice("0123456789") for _ in range(n))
        return make_task(self.domain, digits, self.head, f"spelldigits/{split}/{index}")

    def train_task(self, index: int) -> Task:
        return self._task(self.seed, index, "train")

    def eval_tasks(self) -> list[Task]:
        return list(self._eval)


class SpellEnv(SingleTurnEnv):
    """One single-turn episode: show the digits, check the one reply."""

    def __init__(self, domain: str) -> None:
        super().__init__(domain, _score)


def _score(task: Task, reply: str) -> tuple[Score, dict[str, Any]]:
    verdict = check(task.target, reply)
    return verdict.score, {"flags": verdict.flags}


class SpellDomain:
    def __init__(self, name: str, source: SpellSource) -> None:
        self.name, self.source = name, source

    def make_env(self) -> SpellEnv:
        return SpellEnv(self.name)

    async def close(self) -> None:
        return None


class SpellDigitsPlugin:
    name = "spelldigits"
    about = "Spell digits as words ('say 7 3 1' -> 'seven three one'), checked word by word (an example plugin)."
    options_model = SpellOptions
    components = ("words", "exact")
    tools = ()

    def build(self, section: Any, options: SpellOptions, ctx: BuildContext) -> SpellDomain:
        head = preamble(*section_prompt(section, ""))
        return SpellDomain(section.name, SpellSource(section.name, options, ctx.seed, section.eval_seed,
                                                     section.eval_size, head))

    def load_task(self, path: Path) -> Task:
        try:
            t = SpellTaskFile.model_validate(read_task_json(path))
        except ValidationError as e:
            fields = "; ".join(f"{'.'.join(map(str, err['loc']))}: {err['msg']}" for err in e.errors())
            raise TaskError(f"{path}: invalid spelldigits task: {fields}") from None
        return make_task(self.name, t.digits, [], t.id or Path(path).stem)

    async def verify(self, task: Task, answer: str, ctx: BuildContext) -> Verdict:
        return check(task.target, answer)


plugin = SpellDigitsPlugin()
__all__ = ["SpellDigitsPlugin", "SpellOptions", "check", "plugin"]
