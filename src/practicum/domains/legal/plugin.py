"""The ``legal`` plugin object: options, the task source, the single-turn environment, task
files and verify."""

from __future__ import annotations

import hashlib
import random
from pathlib import Path
from typing import Any, Literal, get_args

from pydantic import Field, model_validator

import practicum.domains.annotations as ann
from practicum.domains.annotations import JudgeOptions
from practicum.domains.legal import citations, constitution, contracts, licences
from practicum.domains.legal.checks import COMPARATORS
from practicum.domains.plugin import BuildContext, Options, Verdict, held_out, preamble, resolve_path, task_target
from practicum.envs.base import Observation, SingleTurnEnv, cycle_index
from practicum.errors import ConfigError, TaskError
from practicum.records import Message, Task

Kind = Literal["license_permission", "license_identify", "constitution_topic", "constitution_xref", "citation_find",
               "citation_list", "citation_court", "precedence", "definition", "deadline", "amount", "extract", "condition"]
ALL_KINDS: tuple[Kind, ...] = get_args(Kind)
assert ALL_KINDS == (*licences.LICENCE_KINDS, *constitution.CONSTITUTION_KINDS, *citations.CITATION_KINDS,
                     *contracts.CONTRACT_KINDS), "Kind lists every generator's kinds"
EVAL_SIZE, EVAL_SEED = 40, 4242
DEFAULT_SYSTEM_PROMPT = ("You are a careful legal analyst. Answer from the documents given, reading every clause that "
                         "bears on the question. Give the final answer inside <answer></answer> tags, in the format "
                         "the question asks for.")


class LegalSource(Options):
    kind: Literal["generated", "annotated"] = Field("generated", description="generated: seeded tasks over the shipped texts and generated contracts; annotated: a practicum-annotated/1 file (path).")
    path: str | None = Field(None, description="annotated: the task file (.json or .jsonl; relative paths resolve against the config file).")
    eval_fraction: float = Field(0.2, ge=0, lt=1, description="annotated: leading fraction of the file's tasks held out for evaluation.")

    @model_validator(mode="after")
    def _annotated_needs_path(self) -> LegalSource:
        if self.kind == "annotated" and not self.path:
            raise ValueError("an annotated source needs 'path' (a practicum-annotated/1 file)")
        return self


class LegalOptions(Options):
    """A legal domain section's ``options:`` (docs/legal.md)."""

    source: LegalSource = Field(default_factory=lambda: LegalSource.model_validate({"kind": "generated"}),
                                description="Where tasks come from (default: generated).")
    kinds: list[Kind] = Field(default_factory=lambda: list(ALL_KINDS), min_length=1, description="Question kinds to draw from (generated).")
    tiers: list[Literal[1, 2, 3]] = Field([1, 2, 3], min_length=1, description="Difficulty tiers to keep (generated).")
    max_document_tokens: int = Field(2200, ge=300, description="Longest licence or article quoted in a prompt, in tokens (characters / 4).")
    full_texts: bool = Field(False, description="Quote licence texts of any length (GPL-3.0 is about 9,000 tokens): for models with long windows.")
    judge: JudgeOptions = Field(default_factory=lambda: JudgeOptions.model_validate({}), description="Model-as-judge for `check: judge` rubric items (off by default).")
    eval_size: int | None = Field(None, ge=0, description=f"Held-out tasks; default: the section's eval_size if set, else {EVAL_SIZE}.")
    eval_seed: int | None = Field(None, description=f"Seed of the held-out tasks; default: the section's eval_seed if set, else {EVAL_SEED}.")

    @model_validator(mode="after")
    def _kinds_have_tiers(self) -> LegalOptions:
        if set(self.kinds) <= {"extract"} and 1 not in self.tiers:
            raise ValueError("kinds: extract questions are all tier 1, and tiers leaves tier 1 out")
        return self


# --- tasks --------------------------------------------------------------------------------------

def generate(kind: str, rng: random.Random, options: LegalOptions) -> tuple[int, str, ann.AnswerKey, str, dict[str, Any]]:
    """One question of ``kind``: (tier, prompt text, key, reference reply, metadata)."""
    limit = None if options.full_texts else options.max_document_tokens
    if kind == "license_permission":
        lic, scenario = rng.choice(licences.permission_tasks(limit))
        q: Any = licences.permission_question(lic, scenario)
    elif kind == "license_identify":
        q = licences.identify_question(rng.choice(licences.identify_pool(limit)), rng)
    elif kind == "constitution_topic":
        per_article = (limit or 100_000) * 4 // 5  # five articles share the budget
        q = constitution.topic_question(rng.choice(constitution.topic_pool(per_article)), rng, per_article)
    elif kind == "constitution_xref":
        q = constitution.xref_question(rng.choice(constitution.xref_pool((limit or 100_000) * 4)))
    elif kind in citations.CITATION_KINDS:
        q = citations.ask(citations.make_passage(rng), kind, rng)
    else:
        c = contracts.make_contract(rng)
        cq = contracts.ask(c, kind, rng)
        text = f"{c.text()}\nQuestion: {cq.question}\n{cq.instruction}"
        return cq.tier, text, cq.key, cq.reference, {"contract": c.kind, "question": cq.question}
    text = f"{q.context}\n\nQuestion: {q.question}\n{q.instruction}"
    return q.tier, text, q.key, q.reference, {**q.meta, "question": q.question}


class GeneratedSource:
    """Tasks as a pure function of (seed, index); training never draws a held-out question."""

    def __init__(self, domain: str, options: LegalOptions, seed: int, system: list[Message]) -> None:
        self.domain, self.options, self.seed, self.system = domain, options, seed, system
        self._eval: list[Task] | None = None
        self._eval_prompts: set[str] = set()

    def task(self, seed: int, index: int, avoid: set[str] | None = None) -> Task:
        o = self.options
        for attempt in range(200):
            rng = random.Random(f"legal/{seed}/{index}/{attempt}")
            kind = rng.choice(o.kinds)
            tier, text, key, reference, meta = generate(kind, rng, o)
            if tier not in o.tiers or (avoid and _digest(text) in avoid):
                continue
            return Task(id=f"legal/{kind}/{seed}-{index}", domain=self.domain,
                        prompt=[*self.system, Message(role="user", content=text)], target=key.model_dump(),
                        metadata={"kind": kind, "tier": tier, "reference": reference, **meta})
        raise ConfigError(f"legal: no task of kinds {o.kinds} in tiers {o.tiers} after 200 draws; widen kinds or tiers")

    def eval_tasks(self) -> list[Task]:
        if self._eval is None:
            self._eval = [self.task(EVAL_SEED if self.options.eval_seed is None else self.options.eval_seed, i) for i in range(self.options.eval_size or 0)]
            self._eval_prompts = {_digest(t.prompt[-1].content) for t in self._eval}
        return list(self._eval)

    def train_task(self, index: int) -> Task:
        self.eval_tasks()
        return self.task(self.seed, index, avoid=self._eval_prompts)


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def annotated_task(t: ann.AnnotatedTask, domain: str, system: list[Message]) -> Task:
    key = t.key()
    # the gold alone is a reference only when there is no rubric it could fail
    reference = t.reference or (_gold_reply(key) if key.gold is not None and not key.rubric else None)
    meta: dict[str, Any] = {"kind": t.kind or "annotated", "tier": t.tier, "question": t.question,
                            "annotators": [a.annotator for a in t.annotations]}
    if reference is not None:
        meta["reference"] = reference
    return Task(id=t.id, domain=domain, prompt=[*system, Message(role="user", content=t.prompt_text(ANSWER_FORMAT))],
                target=key.model_dump(), metadata=meta)


ANSWER_FORMAT = "Give the final answer inside <answer></answer> tags."


def _gold_reply(key: ann.AnswerKey) -> str:
    g = key.gold
    if isinstance(g, dict):
        body = "\n".join(f"{k}: {'; '.join(map(str, v)) if isinstance(v, list) else v}" for k, v in g.items())
        return f"<answer>\n{body}\n</answer>"
    if isinstance(g, list):
        return "<answer>\n" + "\n".join(map(str, g)) + "\n</answer>"
    return f"<answer>{g}</answer>"


class AnnotatedSource:
    """Tasks of an annotated file; the leading ``eval_fraction`` is held out."""

    def __init__(self, domain: str, path: Path, eval_fraction: float, seed: int, system: list[Message]) -> None:
        tasks = [annotated_task(t, domain, system) for t in ann.load_annotated(path, COMPARATORS)]
        n_eval = int(len(tasks) * eval_fraction)
        self.domain, self.seed = domain, seed
        self._eval, self._train = tasks[:n_eval], tasks[n_eval:] or tasks[:n_eval]

    def eval_tasks(self) -> list[Task]:
        return list(self._eval)

    def train_task(self, index: int) -> Task:
        return self._train[cycle_index(index, len(self._train), self.seed)]


# --- the environment ------------------------------------------------------------------------------

async def score(task: Task, reply: str, judge: ann.Judge | None) -> Verdict:
    key = task_target(task, ann.AnswerKey, "a legal answer key")
    question = str(task.metadata.get("question") or task.prompt[-1].content)
    return await ann.grade(key, reply, question, judge, COMPARATORS)


class LegalEnv(SingleTurnEnv):
    """One question, one reply; the verifier may await the judge, so ``step`` is overridden."""

    def __init__(self, domain: str, judge: ann.Judge | None) -> None:
        super().__init__(domain, lambda task, reply: None)  # type: ignore[arg-type,return-value]
        self.judge = judge

    async def step(self, reply: str) -> Observation:
        assert self.task is not None, "step() before reset()"
        v = await score(self.task, reply, self.judge)
        return Observation(messages=[], done=True, score=v.score, info={"flags": v.flags})


class LegalDomain:
    def __init__(self, name: str, source: GeneratedSource | AnnotatedSource, judge: ann.Judge | None) -> None:
        self._name, self._source, self.judge = name, source, judge

    @property
    def name(self) -> str:
        return self._name

    @property
    def source(self) -> GeneratedSource | AnnotatedSource:
        return self._source

    def make_env(self) -> LegalEnv:
        return LegalEnv(self._name, self.judge)

    async def close(self) -> None:
        return None


class LegalPlugin:
    name = "legal"
    about = ("Legal judgment over real licences (choosealicense, SPDX), the Constitution of India, eyecite citations "
             "and generated contracts: precedence, definitions, deadlines, amounts, conditions")
    options_model = LegalOptions
    components = ("answer", "rubric", "judge")
    tools = ()
    comparators = COMPARATORS  # the answer types this domain adds (practicum.domains.annotations)

    def build(self, section: Any, options: LegalOptions, ctx: BuildContext) -> LegalDomain:
        system_prompt = DEFAULT_SYSTEM_PROMPT if section.system_prompt is None else section.system_prompt
        system = preamble(system_prompt, [(e.question, e.reply) for e in section.examples])
        judge = ann.Judge(options.judge, ctx.data_dir("judge")) if options.judge.enabled else None
        if options.source.kind == "annotated":
            source: Any = AnnotatedSource(section.name, resolve_path(options.source.path or "", ctx.base_dir),
                                          options.source.eval_fraction, ctx.seed, system)
        else:
            n_eval, eval_seed = held_out(section, options.eval_size, EVAL_SIZE, options.eval_seed, EVAL_SEED)
            options = options.model_copy(update={"eval_size": n_eval, "eval_seed": eval_seed})
            source = GeneratedSource(section.name, options, ctx.seed, system)
        return LegalDomain(section.name, source, judge)

    def load_task(self, path: Path) -> Task:
        tasks = ann.load_annotated(path, COMPARATORS)
        if len(tasks) != 1:
            raise TaskError(f"{path}: holds {len(tasks)} tasks; `practicum verify legal` takes a file with one")
        return annotated_task(tasks[0], self.name, preamble(DEFAULT_SYSTEM_PROMPT, []))

    async def verify(self, task: Task, answer: str, ctx: BuildContext) -> Verdict:
        return await score(task, answer, ann.judge_from_env(ctx.data_dir("judge")))


plugin = LegalPlugin()
