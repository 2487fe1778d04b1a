"""The ``gym`` domain: any reasoning-gym generator, by name, scored by its own ``score_answer``.

Config (a domain section with ``env: gym``); a run mixes generators with one section each::

    - name: chain_sum
      env: gym
      options: {dataset: chain_sum, params: {min_terms: 2, max_terms: 3}}
    - name: leg_counting
      env: gym
      weight: 0.5
      options: {dataset: leg_counting}   # the generator's default difficulty

``options``: :class:`GymOptions`: ``dataset`` (a generator name; :func:`offline_generators` lists
the ones that run offline: every generator but ``composite``, which only mixes others), its
``params`` (default: the generator's own defaults, its default difficulty) and the weight of the
``format`` component. Tasks are a pure function of (seed, index); held-out tasks come from the
section's ``eval_seed`` and never occur in training.

Scoring: the answer is the content of the reply's single ``<answer></answer>`` pair, else its
last non-empty line; the generator's ``score_answer`` grades it (many give partial credit).
Components: ``score`` (that grade) and ``format`` (the answer was in tags). The value is
``score``, or ``(1 - w) * score + w * format`` with ``options.format_weight = w``.

Task file for ``practicum verify gym --task TASK.json --answer REPLY.txt``: a reasoning-gym entry
``{"dataset": "chain_sum", "question": ..., "answer": ..., "metadata": {...}}`` (what the
generator yields, with the dataset's name), or ``{"dataset": ..., "params": {...}, "seed": 0,
"index": 3}`` to draw that entry from the generator.
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from practicum.domains.gym.source import ReasoningGymSource, drawn_entry, grade, jsonable, reference_answer
from practicum.domains.plugin import (
    BuildContext,
    Options,
    Verdict,
    read_task_json,
    section_prompt,
    validation_summary,
)
from practicum.envs.base import SingleTurnEnv
from practicum.errors import TaskError
from practicum.records import Message, Score, Task
from practicum.scoring import ANSWER_TAG

__all__ = ["GymOptions", "GymPlugin", "offline_generators", "plugin", "reference_answer"]

SYSTEM_PROMPT = (
    "Solve the task. Write the final answer inside <answer></answer> tags, "
    "for example <answer>42</answer>, in exactly the form the task asks for."
)
# Generators that need parameters to exist at all (composite mixes other generators).
NEEDS_PARAMS = frozenset({"composite"})


def generators() -> list[str]:
    import reasoning_gym

    return sorted(reasoning_gym.factory.DATASETS)


def offline_generators() -> list[str]:
    """Every generator that builds with its default parameters, offline."""
    return [g for g in generators() if g not in NEEDS_PARAMS]


def _check_dataset(name: str) -> str:
    known = generators()
    if name not in known:
        close = difflib.get_close_matches(name, known, n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else f" (there are {len(known)}; docs/domains.md lists them)"
        raise ValueError(f"reasoning-gym has no generator {name!r}{hint}")
    return name


class GymOptions(Options):
    """Settings of a ``gym`` domain (its section's ``options:``)."""

    dataset: str = Field("chain_sum", description="The reasoning-gym generator, by name (e.g. chain_sum, leg_counting, sudoku).")
    params: dict[str, Any] = Field(default_factory=dict, description="Generator parameters (default: the generator's own, its default difficulty).")
    format_weight: float = Field(0.0, ge=0, le=1, description="Weight of the format component (answer in tags); the rest is the generator's score.")
    size: int = Field(10_000, ge=1, le=20_000, description="Distinct training tasks (drawing cycles through them). Most generators make each on demand; acre, gsm_symbolic and list_functions build them all up front (acre: about 2 s for 10,000).")

    @field_validator("dataset")
    @classmethod
    def _known(cls, v: str) -> str:
        return _check_dataset(v)

    @model_validator(mode="after")
    def _builds(self) -> GymOptions:
        import reasoning_gym

        try:
            reasoning_gym.create_dataset(self.dataset, seed=0, size=1, **self.params)  # size 1: cheap for every generator
        except (TypeError, AssertionError, ValueError) as e:
            raise ValueError(f"reasoning-gym {self.dataset!r} rejects params {self.params}: {e}") from None
        return self


def extract(reply: str) -> tuple[str, bool]:
    """The answer of a reply, and whether it was in tags: the single ``<answer>`` pair's content,
    else the last non-empty line."""
    tags = ANSWER_TAG.findall(reply)
    if len(tags) == 1 and tags[0].strip():
        return tags[0].strip(), True
    lines = [line.strip() for line in reply.strip().splitlines() if line.strip()]
    return (lines[-1] if lines else ""), False


def score_reply(task: Task, reply: str, format_weight: float = 0.0, source: ReasoningGymSource | None = None) -> Score:
    """The score of one reply: the generator's grade of its answer, and whether it was in tags."""
    answer, tagged = extract(reply)
    graded = grade(task, answer, source) if answer else 0.0
    comps = {"score": graded, "format": float(tagged)}
    value = (1 - format_weight) * graded + format_weight * comps["format"]
    where = "in tags" if tagged else "last line, no answer tags"
    return Score(value=value, components=comps,
                 explanation=f"answer {answer[:200]!r} ({where}) scored {graded:.3f} by {task.metadata['dataset']}")


class GymEnv(SingleTurnEnv):
    """One single-turn episode of one generated task."""

    def __init__(self, domain: str, format_weight: float, source: ReasoningGymSource) -> None:
        super().__init__(domain, lambda task, reply: score_reply(task, reply, format_weight, source))
        self.format_weight = format_weight
        self.source = source


class GymDomain:
    def __init__(self, name: str, source: ReasoningGymSource, format_weight: float) -> None:
        self.name = name
        self.source = source
        self.format_weight = format_weight

    def make_env(self) -> GymEnv:
        return GymEnv(self.name, self.format_weight, self.source)

    async def close(self) -> None:
        return None


class GymTaskFile(BaseModel):
    model_config = ConfigDict(extra="forbid")
    dataset: str
    question: str | None = None
    answer: Any = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    params: dict[str, Any] = Field(default_factory=dict)
    seed: int = 0
    index: int | None = None
    id: str | None = None

    @field_validator("dataset")
    @classmethod
    def _known(cls, v: str) -> str:
        return _check_dataset(v)

    @model_validator(mode="after")
    def _entry_or_index(self) -> GymTaskFile:
        if (self.question is None) == (self.index is None):
            raise ValueError("give either an entry (question, answer, metadata) or an index to draw from the generator")
        return self


class GymPlugin:
    name = "gym"
    about = "Any reasoning-gym generator by name (105 offline), scored by the generator's own score_answer."
    options_model = GymOptions
    components = ("score", "format")
    tools = ()

    def build(self, section: Any, options: GymOptions, ctx: BuildContext) -> GymDomain:
        system, examples = section_prompt(section, SYSTEM_PROMPT)
        source = ReasoningGymSource(section.name, options.dataset, options.params, system, ctx.seed, section.eval_seed,
                                    section.eval_size, examples, options.size)
        return GymDomain(section.name, source, options.format_weight)

    def load_task(self, path: Path) -> Task:
        try:
            t = GymTaskFile.model_validate(read_task_json(path))
        except ValidationError as e:
            raise TaskError(f"{path}: invalid gym task: {validation_summary(e)}") from None
        draw = None
        if t.index is not None:
            draw = {"seed": t.seed, "size": t.index + 1, "params": t.params, "index": t.index}
            try:
                entry = drawn_entry(t.dataset, draw)
            except (TypeError, AssertionError, ValueError) as e:
                raise TaskError(f"{path}: params: reasoning-gym {t.dataset!r} rejects {t.params}: {e}") from None
        else:
            entry = {"question": t.question, "answer": t.answer, "metadata": t.metadata}
        task = make_task(self.name, t.dataset, jsonable(entry), [Message(role="system", content=SYSTEM_PROMPT)],
                         t.id or path.stem)
        if draw is not None:
            task.metadata["draw"] = draw
        return task

    async def verify(self, task: Task, answer: str, ctx: BuildContext) -> Verdict:
        return Verdict(score_reply(task, answer))


def make_task(domain: str, dataset: str, entry: dict[str, Any], head: list[Message], task_id: str) -> Task:
    return Task(id=task_id, domain=domain, prompt=[*head, Message(role="user", content=str(entry["question"]))],
                target=entry.get("answer"),
                metadata={"source": "reasoning_gym", "dataset": dataset, "entry": entry, "reference": reference_answer(entry)})


plugin = GymPlugin()
