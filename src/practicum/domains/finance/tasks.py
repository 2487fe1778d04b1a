"""Finance tasks from files, and scoring any finance task.

* :func:`load_task_file`: the task file of ``practicum verify finance`` (docs/finance.md): a
  question with its answer key (``answer`` and ``kind``, or ``parts``), or a draw from the
  generator (``{"draw": {"seed": 0, "index": 3, "options": {...}}}``), or an expert-annotated
  task in the ``practicum-annotated/1`` format of :mod:`practicum.domains.annotations`;
* :func:`load_tasks`: a ``.json``, a ``.jsonl`` or a folder of ``.json`` task files (the
  ``tasks`` source); :func:`load_annotated`: an annotated file (the ``annotated`` source);
* :func:`score`: a reply's :class:`~practicum.domains.plugin.Verdict` for any of them.

Annotated tasks may use the finance answer types, registered as comparators with the
annotations module: ``finance`` (``gold`` is a finance answer key ``{"parts": [...]}``, scored
by :mod:`.verifier` with its partial credit), and ``amount``, ``percent``, ``fraction``,
``ratio`` (``gold`` a number; ``unit`` the scale of an amount; ``tolerance`` as in the format),
besides the module's own ``label``, ``number``, ``date``, ``set`` and ``fields``. Their scores
carry ``correct`` and ``credit`` like generated tasks, plus the module's ``answer``, ``rubric``
and ``judge`` components.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationError, model_validator

import practicum.domains.annotations as ann
from practicum.domains.finance.env import DEFAULT_SYSTEM_PROMPT, EVAL_SEED, FinanceSource, answer_format
from practicum.domains.finance.options import FinanceOptions
from practicum.domains.finance.verifier import AnswerKey, Part, check, score_part
from practicum.domains.plugin import Options, Verdict, read_task_json, task_target
from practicum.envs.base import read_jsonl
from practicum.errors import TaskError
from practicum.records import Message, Score, Task


class Draw(Options):
    seed: int = 0
    index: int = Field(0, ge=0)
    options: dict[str, Any] = Field(default_factory=dict)


class TaskFile(Options):
    """One task file of ``practicum verify finance`` (docs/finance.md)."""

    id: str | None = None
    question: str | None = Field(None, min_length=1)
    context: str | None = None
    parts: list[Part] | None = Field(None, min_length=1)
    answer: float | bool | str | None = None
    kind: Literal["amount", "percent", "fraction", "ratio", "number", "boolean", "text", "year"] | None = None
    scale: Literal["units", "thousands", "millions", "billions"] = "units"
    decimals: int | None = Field(None, ge=0, le=8)
    tolerance: float | None = Field(None, ge=0)
    unit: str | None = None
    aliases: list[str] = Field(default_factory=list)
    draw: Draw | None = None

    @model_validator(mode="after")
    def _shape(self) -> TaskFile:
        if self.draw is not None:
            if self.question or self.parts or self.answer is not None:
                raise ValueError("a draw takes no question, parts or answer: it regenerates them")
            return self
        if not self.question:
            raise ValueError("question: required (or give a draw)")
        if (self.parts is None) == (self.answer is None):
            raise ValueError("give either parts or answer (with kind)")
        if self.answer is not None and self.kind is None:
            raise ValueError("kind: required with answer")
        return self

    def key(self) -> AnswerKey:
        if self.parts is not None:
            return AnswerKey(parts=self.parts)
        return AnswerKey(parts=[Part(kind=self.kind, value=self.answer, scale=self.scale,  # type: ignore[arg-type]
                                     decimals=self.decimals, tolerance=self.tolerance, unit=self.unit,
                                     aliases=self.aliases)])


def _where(e: ValidationError, prefix: str = "") -> str:
    """The first error as ``field: message`` (a model-level message names its field itself)."""
    err = e.errors()[0]
    loc = prefix + ".".join(str(x) for x in err["loc"])
    msg = err["msg"].removeprefix("Value error, ")
    return f"{loc.rstrip('.')}: {msg}" if loc else msg


def task_from_json(raw: Any, where: str, domain: str = "finance", system: list[Message] | None = None) -> Task:
    """A task from one task-file object; ``where`` names the file (and line) in errors."""
    if not isinstance(raw, dict):
        raise TaskError(f"{where}: a finance task must be a JSON object")
    try:
        t = TaskFile.model_validate(raw)
    except ValidationError as e:
        raise TaskError(f"{where}: {_where(e)}") from None
    try:
        key = t.key() if t.draw is None else None
    except ValidationError as e:  # a part built from answer/kind/...: name the answer
        raise TaskError(f"{where}: {_where(e, 'answer' if t.parts is None else '')}") from None
    system = [Message(role="system", content=DEFAULT_SYSTEM_PROMPT)] if system is None else system
    if t.draw is not None:
        try:
            opts = FinanceOptions.model_validate(t.draw.options)
        except ValidationError as e:
            raise TaskError(f"{where}: {_where(e, 'draw.options.')}") from None
        opts = opts.model_copy(update={"eval_size": 0, "eval_seed": EVAL_SEED})
        task = FinanceSource(domain, opts, t.draw.seed, system).draw(t.draw.seed, t.draw.index)
        return task.model_copy(update={"id": t.id or task.id}) if t.id else task
    assert key is not None and t.question is not None
    text = (f"{t.context}\n\n" if t.context else "") + f"Question: {t.question}\n{answer_format(key)}"
    return Task(id=t.id or f"finance/{Path(where.split(':')[0]).stem}", domain=domain,
                prompt=[*system, Message(role="user", content=text)], target=key.model_dump(),
                metadata={"source": "file", "reference": key.reference()})


def load_task_file(path: Path) -> Task:
    raw = read_task_json(path)
    if isinstance(raw, dict | list) and _is_annotated(raw):
        tasks = load_annotated(path)
        if len(tasks) != 1:
            raise TaskError(f"{path}: holds {len(tasks)} annotated tasks; `practicum verify` takes a file of one")
        return tasks[0]
    return task_from_json(raw, str(path))


def load_tasks(path: Path, domain: str, system: list[Message]) -> list[Task]:
    """The tasks of a ``.json`` file, a ``.jsonl`` file (one per line) or a folder of ``.json`` files."""
    if path.is_dir():
        files = sorted(path.glob("*.json"))
        if not files:
            raise TaskError(f"{path}: no .json task files in this folder")
        return [task_from_json(read_task_json(f), str(f), domain, system) for f in files]
    if path.suffix == ".jsonl":
        tasks = [task_from_json(raw, f"{path}:{n}", domain, system) for n, raw in read_jsonl(path)]
        if not tasks:
            raise TaskError(f"{path}: no tasks")
        return tasks
    return [task_from_json(read_task_json(path), str(path), domain, system)]


# --- expert-annotated tasks (practicum.domains.annotations) ----------------------------------------------

def _finance_comparator(given: str, gold: Any, key: ann.AnswerKey) -> ann.Match:
    """answer_type ``finance``: ``gold`` is a finance answer key, ``{"parts": [...]}``."""
    verdict = check(AnswerKey.model_validate(gold), given)
    return ann.Match(verdict.score.value, verdict.score.explanation, verdict.flags[0] if verdict.flags else None)


def _kind_comparator(kind: str) -> ann.Comparator:
    """answer_type ``amount``/``percent``/``fraction``/``ratio``: ``gold`` a number; ``unit``
    names the scale of an amount (thousands, millions...); ``tolerance`` as in the format."""
    def compare(given: str, gold: Any, key: ann.AnswerKey) -> ann.Match:
        scale = key.unit if kind == "amount" and key.unit in ("units", "thousands", "millions", "billions") else "units"
        part = Part(kind=kind, value=float(gold), scale=scale, tolerance=key.tolerance or None)  # type: ignore[arg-type]
        r = score_part(part, given)
        return ann.Match(r.credit, r.why, r.flags[0] if r.flags else None)
    return compare


COMPARATORS: dict[str, ann.Comparator] = {"finance": _finance_comparator,
                                          **{k: _kind_comparator(k) for k in ("amount", "percent", "fraction", "ratio")}}
ANSWER_INSTRUCTION = "Write the final answer inside <answer></answer> tags."


def _is_annotated(raw: Any) -> bool:
    first = raw[0] if isinstance(raw, list) and raw else raw
    return isinstance(first, dict) and (first.get("format") == ann.FORMAT or "gold" in first or "rubric" in first
                                        or "annotations" in first or "answer_type" in first)


def load_annotated(path: Path, domain: str = "finance", system: list[Message] | None = None) -> list[Task]:
    """Expert-annotated tasks of one file as finance tasks (errors name the file and the field)."""
    tasks = ann.load_annotated(path, COMPARATORS)
    out = []
    for t in tasks:
        key = t.key()
        if key.answer_type in COMPARATORS and key.gold is not None:
            try:
                if key.answer_type == "finance":
                    AnswerKey.model_validate(key.gold)
                else:
                    float(key.gold)
            except (ValidationError, TypeError, ValueError) as e:
                detail = _where(e, "gold.") if isinstance(e, ValidationError) else f"gold: not a number: {key.gold!r}"
                raise TaskError(f"{path}: task {t.id!r}: {detail}") from None
        instruction = (answer_format(AnswerKey.model_validate(key.gold)) if key.answer_type == "finance"
                       else ANSWER_INSTRUCTION)
        sys_msgs = [Message(role="system", content=DEFAULT_SYSTEM_PROMPT)] if system is None else system
        out.append(Task(id=t.id, domain=domain, prompt=[*sys_msgs, Message(role="user", content=t.prompt_text(instruction))],
                        target=key.model_dump(), metadata={"source": "annotated", "question": t.question,
                                                           "kind": t.kind, "tier": t.tier,
                                                           "reference": t.reference or _annotated_reference(key)}))
    return out


def _annotated_reference(key: ann.AnswerKey) -> str | None:
    if key.answer_type == "finance":
        return AnswerKey.model_validate(key.gold).reference()
    return None if key.gold is None or key.rubric else f"<answer>{key.gold}</answer>"


async def score(task: Task, reply: str, judge: ann.Judge | None = None) -> Verdict:
    """Score one reply to a generated, file or annotated finance task."""
    if task.metadata.get("source") == "annotated":
        key = task_target(task, ann.AnswerKey, "an annotated answer key")
        v = await ann.grade(key, reply, str(task.metadata.get("question", "")), judge, COMPARATORS)
        comps = {"correct": float(v.score.value >= 1.0), "credit": v.score.value, **v.score.components}
        return Verdict(Score(value=v.score.value, components=comps, explanation=v.score.explanation), v.flags)
    fkey = task_target(task, AnswerKey, "a finance answer key")
    return check(fkey, reply)
