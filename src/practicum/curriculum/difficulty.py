"""Difficulty sequencing: per-task pass rates, a band-pass filter on groups, difficulty pools,
and a level curriculum for generated tasks.

* :class:`PassRates` keeps, per task, the (optionally forgetting) count of attempts and the
  sum of rewards: its pass rate is the mean reward, so 0/1 and partial-credit rewards both work.
  A task is known by :func:`task_key`, its content, not its id: a generator names a task by its
  draw index, so a small space of questions (reasoning-gym ``products``: 100) comes back under
  ever new ids, and a pass rate kept by id would never see a task twice.
* :func:`band_pass` keeps a group only when its mean reward lies strictly inside
  (``min_pass``, ``max_pass``) and its rewards differ: an all-right or all-wrong group has zero
  advantage for every episode and teaches nothing (DAPO's dynamic sampling).
  :func:`refill` says how many more groups to draw when the filter left the batch short, and
  when to stop trying (DAPO's ``max_num_gen_batches``): a step that cannot fill its batch
  trains on what it has rather than spinning.
* :class:`DifficultyPools` sorts tasks by known pass rate into easy / normal / hard and accepts a
  drawn task with its pool's probability (prime-rl's difficulty pools); a task never seen is
  ``normal``. Acceptance uses a generator the caller seeds per draw, so it stays reproducible.
* :class:`LevelCurriculum` walks a generated domain through levels of generator parameters
  (reasoning-gym sizes, long-context lengths): up when the domain's recent pass rate reaches
  ``promote``, down when it falls to ``demote``, with a ``review`` share of draws from easier
  levels so earlier skills stay trained. Each change is a :class:`LevelChange` record.
* :class:`Revisits` gives a task the policy failed another try later (Kimi k1.5's prioritised
  sampling by failure rate, for sources whose tasks never recur by themselves: a generator
  draws a fresh task every time, so pools have no pass rate to go on). A group whose mean
  reward is at or below ``below`` puts its task in its domain's queue (at most ``visits`` times a
  task, ``capacity`` tasks a domain, the oldest dropped); a draw of that domain then re-issues the
  oldest queued task with probability ``share`` instead of a fresh one. The domain's share of the
  draws is unchanged: only which of its tasks it practises moves, towards the ones it fails.
  With a ``hint`` the task comes back with its answer in reach: a guided group (see
  :mod:`practicum.curriculum.scaffold`) whose first ``hint_share`` of episodes see the hint, with
  ``{answer}`` standing for the task's target, and all of whose episodes are trained against the
  plain prompt. A task failed by every reply - a confidently wrong fact such as ``6 * 4 = 28`` in
  8 of 8 - gives GRPO nothing to reinforce; with the answer in reach for a few episodes the group
  has right replies, and the update raises them after the plain question (QuestA, Li et al.
  2025: hard questions augmented with part of their solution; LUFFY's off-policy guidance).

All state is plain dicts of numbers (``state()``/``load()``), for checkpoints.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections import deque
from typing import Any, Literal

from pydantic import BaseModel, Field, model_validator

from practicum.curriculum.base import Strict
from practicum.curriculum.scaffold import with_help
from practicum.records import Task

Pool = Literal["easy", "normal", "hard"]

TASK_KEY = "task_key"  # the metadata under which a scaffolded task keeps its plain content's key


def task_key(task: Task) -> str:
    """The key a task's pass rate is kept under: the same question, drawn twice, is one task.

    ``domain:`` and a hash of the prompt and the target. A scaffolded task carries its plain
    task's key in ``metadata["task_key"]`` (the driver stamps it before the help goes in), so a
    helped and an unhelped draw of one question share a pass rate."""
    stamped = task.metadata.get(TASK_KEY)
    if stamped is not None:
        return str(stamped)
    content = json.dumps([[m.role, m.content] for m in task.prompt] + [task.target], default=str, sort_keys=True)
    return f"{task.domain}:{hashlib.sha1(content.encode()).hexdigest()[:16]}"


DEFAULT_ACCEPT: dict[Pool, float] = {"easy": 0.1, "normal": 1.0, "hard": 0.3}


class FilterConfig(Strict):
    enabled: bool = Field(default=False, description="Keep only groups whose mean reward lies strictly between min_pass "
                          "and max_pass and whose rewards differ; draw more to refill the batch.")
    min_pass: float = Field(default=0.0, ge=0, le=1, description="Groups with mean reward at or below this are dropped (too hard).")
    max_pass: float = Field(default=1.0, ge=0, le=1, description="Groups with mean reward at or above this are dropped (too easy).")
    max_draw_factor: float = Field(default=3.0, ge=1, description="Most groups drawn for one step, as a multiple of "
                                   "prompts_per_step; past it the step trains on the groups it kept.")

    @model_validator(mode="after")
    def _band(self) -> FilterConfig:
        if self.min_pass >= self.max_pass:
            raise ValueError(f"filter.min_pass ({self.min_pass}) must be below max_pass ({self.max_pass})")
        return self


class PoolsConfig(Strict):
    enabled: bool = Field(default=False, description="Accept drawn tasks by the difficulty pool their pass rate puts them in.")
    easy_above: float = Field(default=0.9, ge=0, le=1, description="A task whose pass rate is at least this is easy.")
    hard_below: float = Field(default=0.1, ge=0, le=1, description="A task whose pass rate is at most this is hard.")
    min_attempts: int = Field(default=4, ge=1, description="Episodes of a task before its pass rate places it in a pool (before: normal).")
    accept: dict[Pool, float] = Field(default_factory=lambda: dict(DEFAULT_ACCEPT),
                                      description="Probability that a drawn task of each pool is kept (a rejected one is replaced by the next draw).")
    decay: float = Field(default=1.0, gt=0, le=1, description="Each new observation of a task multiplies its old counts by "
                         "this (1: never forget; < 1 follows a task whose pass rate moves as the policy learns).")


class LevelsConfig(Strict):
    levels: list[dict[str, Any]] = Field(default_factory=list, description="Generator parameters of each level, "
                                         "easiest first (e.g. [{length: 2}, {length: 4}]). Empty: no level curriculum.")
    promote: float = Field(default=0.7, ge=0, le=1, description="Go up a level when the recent pass rate reaches this.")
    demote: float | None = Field(default=0.1, ge=0, le=1, description="Go down a level when it falls to this (None: never down).")
    window: int = Field(default=32, ge=1, description="Recent groups of the current level the pass rate is taken over; a "
                        "change needs a full window at the new level first.")
    review: float = Field(default=0.1, ge=0, lt=1, description="Share of draws taken from an easier level, picked uniformly (0: none).")


class RevisitConfig(Strict):
    enabled: bool = Field(default=False, description="Give failed tasks another try: a draw of a domain re-issues one of "
                          "its failed tasks with probability `share` (the domain's share of draws is unchanged).")
    share: float = Field(default=0.25, ge=0, le=1, description="Chance that a draw of a domain with failed tasks queued "
                         "takes the oldest of them instead of a fresh task.")
    below: float = Field(default=0.0, ge=0, le=1, description="A group whose mean reward is at or below this failed "
                         "(0: every episode scored 0).")
    visits: int = Field(default=2, ge=1, description="Most times one task is re-issued.")
    capacity: int = Field(default=64, ge=1, description="Most failed tasks queued per domain (the oldest go first).")
    domains: list[str] = Field(default_factory=list, description="The domains whose failed tasks come back (empty: every "
                               "domain); the others' draws are always fresh.")
    hint: str | None = Field(default=None, min_length=1, description="Text appended to a re-issued task's question for the first "
                             "`hint_share` of its episodes, `{answer}` standing for the task's target (a task whose "
                             "target is not a plain value comes back without it); every episode is trained against the "
                             "plain question. None: re-issued as it was.")
    hint_share: float = Field(default=0.25, gt=0, le=1, description="Share of a hinted group's episodes that see the "
                              "hint (at least one); the rest run unaided and give the group its baseline.")


REVISIT = "revisit"  # task.metadata key: how many times this task has been re-issued


class Revisits:
    """Per-domain queues of failed tasks to re-issue (see the module)."""

    def __init__(self, cfg: RevisitConfig) -> None:
        self.cfg = cfg
        self.queues: dict[str, deque[Task]] = {}
        self.issued = 0  # tasks re-issued so far

    def offer(self, task: Task, rewards: list[float]) -> bool:
        """A finished group of ``task``: queue the task when the group failed and the task has
        visits left. Returns whether it was queued."""
        if not self.cfg.enabled or not rewards or sum(rewards) / len(rewards) > self.cfg.below:
            return False
        if self.cfg.domains and task.domain not in self.cfg.domains:
            return False
        if int(task.metadata.get(REVISIT, 0)) >= self.cfg.visits:
            return False
        self.queues.setdefault(task.domain, deque(maxlen=self.cfg.capacity)).append(task)
        return True

    def take(self, domain: str, rng: random.Random) -> Task | None:
        """The task for a draw of ``domain``: its oldest failed task with probability ``share``
        (None: draw a fresh one). ``rng`` is the draw's own seeded generator."""
        queue = self.queues.get(domain)
        if not self.cfg.enabled or not queue or rng.random() >= self.cfg.share:
            return None
        task = queue.popleft()
        self.issued += 1
        task = task.model_copy(update={"metadata": {**task.metadata, REVISIT: int(task.metadata.get(REVISIT, 0)) + 1}})
        return self.hinted(task)

    def hinted(self, task: Task) -> Task:
        """``task`` with the configured hint for a guided share of its episodes, its pass rate kept
        under the plain question's key; unchanged without a hint or a plain-value target."""
        target = task.target
        if self.cfg.hint is None or isinstance(target, bool) or not isinstance(target, str | int | float):
            return task
        plain = task.model_copy(update={"metadata": {**task.metadata, TASK_KEY: task_key(task)}})
        return with_help(plain, [], self.cfg.hint.replace("{answer}", str(target)), None, self.cfg.hint_share)

    def waiting(self) -> dict[str, int]:
        return {d: len(q) for d, q in self.queues.items()}

    def state(self) -> dict[str, Any]:
        return {"issued": self.issued, "queues": {d: [t.model_dump(mode="json") for t in q] for d, q in self.queues.items()}}

    def load(self, state: dict[str, Any]) -> None:
        self.issued = int(state.get("issued", 0))
        self.queues = {d: deque((Task.model_validate(t) for t in q), maxlen=self.cfg.capacity)
                       for d, q in state.get("queues", {}).items()}


class FilterDecision(BaseModel):
    """Whether a group is trained on, and why (for the store and the step metrics)."""

    keep: bool
    mean: float
    reason: str  # "kept", "uniform", "too easy", "too hard", "empty"


class Refill(BaseModel):
    """What to do after filtering: draw ``draw`` more groups; ``stop``: train on what is kept."""

    draw: int
    stop: bool


class LevelChange(BaseModel):
    """A level move of one domain's curriculum, to be recorded and shown in the step summary."""

    domain: str
    step: int
    old: int
    new: int
    pass_rate: float


def band_pass(rewards: list[float], cfg: FilterConfig) -> FilterDecision:
    if not rewards:
        return FilterDecision(keep=False, mean=0.0, reason="empty")
    mean = sum(rewards) / len(rewards)
    if max(rewards) - min(rewards) < 1e-9:
        return FilterDecision(keep=False, mean=mean, reason="uniform")
    if mean >= cfg.max_pass:
        return FilterDecision(keep=False, mean=mean, reason="too easy")
    if mean <= cfg.min_pass:
        return FilterDecision(keep=False, mean=mean, reason="too hard")
    return FilterDecision(keep=True, mean=mean, reason="kept")


def refill(wanted: int, kept: int, drawn: int, cfg: FilterConfig) -> Refill:
    """After filtering: ``wanted`` groups per step, ``kept`` passed, ``drawn`` drawn this step.

    Draws exactly the shortfall (groups in flight may still pass), within the budget of
    ``max_draw_factor`` x ``wanted`` draws per step; when the budget is spent, stop.
    """
    short = wanted - kept
    if short <= 0:
        return Refill(draw=0, stop=True)
    budget = int(cfg.max_draw_factor * wanted) - drawn
    if budget <= 0:
        return Refill(draw=0, stop=True)
    return Refill(draw=min(short, budget), stop=False)


class PassRates:
    """Mean reward per task key (:func:`task_key`), from every training group observed."""

    def __init__(self, decay: float = 1.0) -> None:
        self.decay = decay
        self.counts: dict[str, list[float]] = {}  # task id -> [attempts, reward sum], decayed

    def observe(self, task_id: str, rewards: list[float]) -> None:
        n, s = self.counts.get(task_id, [0.0, 0.0])
        self.counts[task_id] = [n * self.decay + len(rewards), s * self.decay + sum(rewards)]

    def attempts(self, task_id: str) -> float:
        return self.counts.get(task_id, [0.0, 0.0])[0]

    def rate(self, task_id: str) -> float | None:
        n, s = self.counts.get(task_id, [0.0, 0.0])
        return s / n if n > 0 else None

    def state(self) -> dict[str, Any]:
        return {"decay": self.decay, "counts": {k: list(v) for k, v in self.counts.items()}}

    def load(self, state: dict[str, Any]) -> None:
        self.decay = float(state["decay"])
        self.counts = {k: [float(v[0]), float(v[1])] for k, v in state["counts"].items()}


class DifficultyPools:
    def __init__(self, cfg: PoolsConfig, rates: PassRates) -> None:
        self.cfg, self.rates = cfg, rates

    def pool(self, task_id: str) -> Pool:
        rate = self.rates.rate(task_id)
        if rate is None or self.rates.attempts(task_id) < self.cfg.min_attempts:
            return "normal"
        if rate >= self.cfg.easy_above:
            return "easy"
        if rate <= self.cfg.hard_below:
            return "hard"
        return "normal"

    def accept(self, task_id: str, rng: random.Random) -> bool:
        """Whether to keep a drawn task; ``rng`` seeded by the draw keeps a run reproducible."""
        return rng.random() < self.cfg.accept.get(self.pool(task_id), 1.0)


class LevelCurriculum:
    """One generated domain's level, moved by the pass rate of its recent groups at that level."""

    def __init__(self, domain: str, cfg: LevelsConfig) -> None:
        if not cfg.levels:
            raise ValueError(f"domain {domain!r}: a level curriculum needs at least one level")
        self.domain, self.cfg = domain, cfg
        self.level = 0
        self.recent: list[float] = []  # mean reward of recent groups at the current level

    def draw_level(self, rng: random.Random) -> int:
        """The level a new task is generated at: the current one, or with probability
        ``review`` an easier one."""
        if self.level > 0 and rng.random() < self.cfg.review:
            return rng.randrange(self.level)
        return self.level

    def params(self, level: int) -> dict[str, Any]:
        return dict(self.cfg.levels[level])

    def observe(self, level: int, rewards: list[float], step: int) -> LevelChange | None:
        """A finished group generated at ``level``; only current-level groups move the level."""
        if level != self.level or not rewards:
            return None
        self.recent.append(sum(rewards) / len(rewards))
        del self.recent[:-self.cfg.window]
        if len(self.recent) < self.cfg.window:
            return None
        rate = sum(self.recent) / len(self.recent)
        new = self.level
        if rate >= self.cfg.promote and self.level + 1 < len(self.cfg.levels):
            new = self.level + 1
        elif self.cfg.demote is not None and rate <= self.cfg.demote and self.level > 0:
            new = self.level - 1
        if new == self.level:
            return None
        change = LevelChange(domain=self.domain, step=step, old=self.level, new=new, pass_rate=rate)
        self.level, self.recent = new, []
        return change

    def state(self) -> dict[str, Any]:
        return {"level": self.level, "recent": list(self.recent)}

    def load(self, state: dict[str, Any]) -> None:
        self.level = int(state["level"])
        self.recent = [float(x) for x in state["recent"]]
