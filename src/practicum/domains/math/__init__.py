"""The ``math`` domain: single-turn problems whose final answer is checked, not trusted.

Config (a domain section with ``env: math``)::

    - name: arithmetic
      env: math
      source: {kind: reasoning_gym, dataset: chain_sum, params: {min_terms: 2, max_terms: 2}}
      options:
        reward: {strict: 0.7, lenient: 0.3, format: 0.0}

``source`` (default: reasoning-gym ``chain_sum`` at its default difficulty):

* ``reasoning_gym``: a reasoning-gym generator (``dataset``, ``params``), scored by the
  generator's own ``score_answer``; held-out tasks come from ``eval_seed`` and never occur in
  training (the ``gym`` domain offers every generator, with its own scorer and components);
* ``jsonl``: a file of ``{"question": ..., "answer": ...}`` lines (LaTeX or plain answers),
  scored with math-verify; the leading ``eval_fraction`` of lines is held out.

``options.reward`` weighs the score components: ``strict`` (the answer inside
``<answer></answer>`` tags is right), ``lenient`` (the answer read leniently — the last number
when there are no tags — is right) and ``format`` (exactly one tag pair, right or wrong).
``closeness: true`` adds a fourth component, not weighed into the score: how near a wrong
tagged number came, ``1 / (1 + |answer - target|)`` (1 when right, 0.5 one off, 0 without a
number in tags), for the curriculum's partial credit (``shaping: {D: {partial: w,
partial_key: closeness}}``): a group whose replies are all wrong then still ranks them.

Task file for ``practicum verify math --task TASK.json --answer REPLY.txt``: a JSON object with
``question`` and ``answer`` (string or number; optional ``id``) checked with math-verify, or a
reasoning-gym entry ``{"dataset": "chain_sum", "question": ..., "answer": ..., "metadata": {...}}``
checked by that generator's scorer. The answer file holds the model's reply (``<answer>`` tags
or not).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from practicum.domains.plugin import (
    BuildContext,
    Options,
    SourceOptions,
    Verdict,
    read_task_json,
    resolve_path,
    section_prompt,
    validation_summary,
)
from practicum.errors import TaskError
from practicum.records import Message, Task
from practicum.scoring import RewardWeights

__all__ = ["MathOptions", "MathPlugin", "plugin"]


class MathSource(SourceOptions):
    kind: Literal["reasoning_gym", "jsonl"] = Field(..., description="reasoning_gym: a generator (dataset, params); jsonl: a file of {question, answer} lines (path).")


class RewardOptions(Options):
    strict: float = Field(0.7, ge=0, description="Weight of a right answer in the requested format.")
    lenient: float = Field(0.3, ge=0, description="Weight of a right answer read leniently (last number).")
    format: float = Field(0.0, ge=0, description="Weight of using the requested format at all, right or wrong. Default 0: a format-only reward was gamed by echoing the instruction (see docs/quickstart.md).")
    closeness: bool = Field(False, description="Also report `closeness`, 1 / (1 + |answer - target|) for a number in the "
                            "answer tags and a numeric target (else 0): partial credit for curriculum shaping "
                            "(`partial_key: closeness`); never weighed into the score.")

    @model_validator(mode="after")
    def _some_weight(self) -> RewardOptions:
        if self.strict + self.lenient + self.format <= 0:
            raise ValueError("reward weights must not all be zero")
        return self

    def weights(self) -> RewardWeights:
        return RewardWeights(self.strict, self.lenient, self.format)


class MathOptions(Options):
    """Settings of a ``math`` domain: ``source:`` and ``options:`` of its section."""

    source: MathSource = Field(default_factory=lambda: MathSource.model_validate({"kind": "reasoning_gym", "dataset": "chain_sum"}),
                               description="Where problems come from (default: reasoning-gym chain_sum).")
    reward: RewardOptions = Field(default_factory=lambda: RewardOptions.model_validate({}), description="Weights of the score components.")


class MathTaskFile(BaseModel):
    """A task file of ``practicum verify math``."""

    model_config = ConfigDict(extra="forbid")
    id: str | None = None
    question: str
    answer: str | int | float
    dataset: str | None = Field(None, description="A reasoning-gym generator: its scorer checks the answer.")
    metadata: dict[str, Any] = Field(default_factory=dict, description="reasoning-gym: the entry's metadata.")


class MathPlugin:
    name = "math"
    about = "Single-turn math problems (reasoning-gym generators or a JSONL file), answers checked by scorers or math-verify."
    options_model = MathOptions
    components = ("strict", "lenient", "format")
    tools = ()

    def build(self, section: Any, options: MathOptions, ctx: BuildContext) -> Any:
        from practicum.domains.math.env import DEFAULT_SYSTEM_PROMPT, JsonlMathSource, MathDomain, ReasoningGymSource

        system, examples = section_prompt(section, DEFAULT_SYSTEM_PROMPT)
        src = options.source
        if src.kind == "reasoning_gym":
            source: Any = ReasoningGymSource(section.name, src.dataset or "", src.params, system, ctx.seed,
                                             section.eval_seed, section.eval_size, examples)
        else:
            source = JsonlMathSource(section.name, resolve_path(src.path or "", ctx.base_dir), system, ctx.seed,
                                     src.eval_fraction, examples)
        return MathDomain(section.name, source, options.reward.weights(), options.reward.closeness)

    def load_task(self, path: Path) -> Task:
        data = read_task_json(path)
        try:
            t = MathTaskFile.model_validate(data)
        except ValidationError as e:
            raise TaskError(f"{path}: invalid math task: {validation_summary(e)}") from None
        from practicum.domains.math.env import DEFAULT_SYSTEM_PROMPT

        prompt = [Message(role="system", content=DEFAULT_SYSTEM_PROMPT), Message(role="user", content=t.question)]
        if t.dataset is not None:
            import reasoning_gym

            if t.dataset not in reasoning_gym.factory.DATASETS:
                raise TaskError(f"{path}: dataset: reasoning-gym has no generator {t.dataset!r}")
            entry = {"question": t.question, "answer": t.answer, "metadata": t.metadata}
            meta = {"source": "reasoning_gym", "dataset": t.dataset, "entry": entry}
        else:
            meta = {"source": "jsonl"}
        meta["reference"] = f"<answer>{t.answer}</answer>"
        return Task(id=t.id or path.stem, domain=self.name, prompt=prompt, target=str(t.answer) if t.dataset is None else t.answer,
                    metadata=meta)

    async def verify(self, task: Task, answer: str, ctx: BuildContext) -> Verdict:
        from practicum.domains.math.env import score_reply

        return Verdict(score_reply(task, answer, RewardWeights()))


plugin = MathPlugin()
