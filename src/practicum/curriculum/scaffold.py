"""A scaffold that fades: help that makes a format or skill reachable at first, then goes.

GRPO reinforces only what the policy samples: a model that never writes the requested
``<answer>`` format zero-shot scores 0 on a strict verifier in every group, every group is
uniform, and nothing is learned. A scaffold makes the behaviour reachable:

* ``examples``: worked examples inserted as earlier user/assistant turns (after any system
  message);
* ``hint``: a line appended to the task's last user message;
* ``prefix``: a forced start of the reply (e.g. ``<answer>``). The task carries it in
  :attr:`ScaffoldedTask.prefix`; the rollout appends its tokens to the generation prompt and
  the environment reads prefix + reply. Those tokens are context (loss mask 0), not samples.

``guided: true`` trains what the help made reachable *as the policy's own*, in the manner of
Guide-GRPO (Nath et al., 2025) and LUFFY (Yan et al., 2025): in a guided group only the first
``share`` of episodes get the help, the others run unaided on the same task, and every episode
is trained against the *plain* prompt - the engine sees the examples and the hint, the trained
context does not - with a forced prefix trained as if the model had written it (loss mask 1,
behaviour log-prob 0: the behaviour policy emitted it with probability 1). The unaided episodes
give the group its baseline, so when the help is what earns the reward the advantage is positive
on the helped episodes, and the update raises the probability of the helped reply after the
plain prompt - which no amount of help kept in the context (mask 0) does. The helped samples
are taken as the policy's own under every ``algorithm.off_policy`` (weight 1, biased towards the
help, as Guide-GRPO without its importance weight; the trainer's ``Sample.guided``): their
log-probs are of the helped context, and the ratio pi_plain / pi_helped (for a forced token, its
own probability) would all but cancel the update on the very tokens the help is there to teach.
Measured (benchmarks/multidomain, 2026-12-05): under ``tis`` with that ratio, products' unaided
episodes never wrote the format in 10 minutes (held-out 0.186 -> 0.264); taken as the policy's
own they wrote it from step 5 on (0.186 -> 0.900).

and is removed so the final policy needs none of it. Each training group is scaffolded with
probability ``level(step) x (1 - probe_share)``; ``level`` falls from 1 to 0 between
``fade_start`` and ``fade_end`` (``linear``, or in ``stages`` equal drops for ``step``;
``constant`` stays at 1 until the threshold), counted on the run's steps (``clock: steps``) or
on the domain's own groups drawn so far (``clock: groups``): in a mix a domain drawn once in six
groups would otherwise lose its help after a sixth of the practice it gets alone, so a fade
counted in groups means the same thing in a single-domain run and in any mix. The
``probe_share`` of groups drawn without help measure the domain's success without it: once the
mean score of the last ``window`` unscaffolded episodes (or of one of its components, ``success``:
``strict`` for a format scaffold) reaches ``threshold``, the scaffold is removed for good
(:class:`ScaffoldChange`, to be recorded). The fade counts the policy's steps: when the drift
guard rolls the policy back, the steps of the discarded branch are added to ``delay``
(:meth:`Curriculum.rewind`), so the help the restored policy had comes back with it; a groups
clock is itself part of the checkpointed state, so the restored count rewinds it.

Evaluation is never scaffolded: a scaffolded task is marked in ``metadata["scaffold"]``, and
:func:`is_scaffolded` is the check an evaluation path uses to refuse one.
"""

from __future__ import annotations

import random
from typing import Any, Literal

from pydantic import BaseModel, Field, model_validator

from practicum.curriculum.base import Strict
from practicum.records import Message, Score, Task


class ScaffoldExample(Strict):
    question: str = Field(..., description="An example question, shown as a user turn.")
    reply: str = Field(..., description="Its worked reply in the requested format, shown as the assistant turn.")


class ScaffoldConfig(Strict):
    examples: list[ScaffoldExample] = Field(default_factory=list, description="Worked examples shown before the question while scaffolded.")
    hint: str | None = Field(default=None, description="Text appended to the task's last user message while scaffolded.")
    prefix: str | None = Field(default=None, description="Forced start of the reply while scaffolded (e.g. '<answer>').")
    schedule: Literal["linear", "step", "constant"] = Field(
        default="linear", description="How the share of scaffolded groups falls: linearly from fade_start to fade_end, in "
        "`stages` equal steps, or not at all (constant: only the threshold removes it).")
    clock: Literal["steps", "groups"] = Field(
        default="steps", description="What fade_start and fade_end count: the run's steps, or the groups of this "
        "domain drawn so far (a fade that means the same alone and in a mix).")
    fade_start: int = Field(default=0, ge=0, description="Step (or domain group, clock: groups) at which the scaffold starts to fade.")
    fade_end: int = Field(default=100, ge=1, description="Step (or domain group, clock: groups) by which the scaffold is gone.")
    stages: int = Field(default=4, ge=1, description="step schedule: number of equal drops between fade_start and fade_end.")
    threshold: float | None = Field(default=0.5, ge=0, le=1, description="Remove the scaffold for good once the mean score (or "
                                    "`success` component) of the last `window` unscaffolded episodes reaches this (None: "
                                    "schedule only).")
    window: int = Field(default=32, ge=1, description="Unscaffolded episodes the success without help is measured over.")
    success: str | None = Field(default=None, description="The component of the verifier's score that counts as success "
                                "without help (e.g. `strict`: a right answer in the requested format); None: the score's "
                                "value. A format scaffold wants the format's own component: a right answer without it "
                                "still earns the math verifier's lenient 0.3.")
    probe_share: float = Field(default=0.1, ge=0, le=1, description="Least share of training groups drawn without the scaffold, to measure success without it.")
    guided: bool = Field(default=False, description="Train helped episodes against the plain prompt (a forced prefix as "
                         "the model's own tokens), with only `share` of a guided group's episodes helped (see the module).")
    share: float = Field(default=0.5, gt=0, le=1, description="guided: share of a guided group's episodes that get the "
                         "help (at least one); the rest run unaided and give the group its baseline.")

    @model_validator(mode="after")
    def _ordered(self) -> ScaffoldConfig:
        if self.fade_end <= self.fade_start:
            raise ValueError(f"scaffold.fade_end ({self.fade_end}) must be after fade_start ({self.fade_start})")
        if not (self.examples or self.hint or self.prefix):
            raise ValueError("scaffold: give at least one of examples, hint, prefix")
        return self


class ScaffoldedTask(BaseModel):
    task: Task  # the prompt with the help in it (or the task unchanged when not scaffolded)
    prefix: str | None  # forced start of the reply, for the rollout


class ScaffoldChange(BaseModel):
    """The scaffold of a domain was removed because its success without help passed the threshold."""

    domain: str
    step: int
    success: float  # mean success (score, or its `success` component) of the last `window` unscaffolded episodes


def is_scaffolded(task: Task) -> bool:
    return "scaffold" in task.metadata


def slot_task(task: Task, slot: int, group_size: int) -> Task:
    """The task episode ``slot`` of a group of ``group_size`` runs: in a guided group only the
    first ``share`` of the slots (at least one) carry the scaffold, the others run the plain task."""
    marks = task.metadata.get("scaffold")
    if not marks or not marks.get("guided"):
        return task
    if slot < guided_slots(float(marks["guided"]), group_size):
        return task
    return task.model_copy(update={"prompt": unaided_messages(task.prompt, marks),
                                   "metadata": {k: v for k, v in task.metadata.items() if k != "scaffold"}})


def guided_slots(share: float, group_size: int) -> int:
    return min(group_size, max(1, round(share * group_size)))


def unaided_messages(messages: list[Message], marks: dict[str, Any]) -> list[Message]:
    """A guided episode's conversation as the environment showed it, without the scaffold's help
    (the worked examples after the system messages, the hint at the end of the last user
    message): the context it is trained against. An environment that rewrote the prompt so that
    the help is no longer where :meth:`Scaffold.apply` put it cannot be guided: ValueError."""
    shots = list(marks.get("shots") or [])
    lead = 0
    while lead < len(messages) and messages[lead].role == "system":
        lead += 1
    if [m.content for m in messages[lead:lead + len(shots)]] != shots:
        raise ValueError("guided scaffold: the environment's prompt does not start with the scaffold's worked examples")
    out = [m.model_copy() for m in messages[:lead] + messages[lead + len(shots):]]
    hint = marks.get("hint_text")
    if hint:
        users = [i for i, m in enumerate(out) if m.role == "user"]
        tail = f"\n\n{hint}"
        if not users or not out[users[-1]].content.endswith(tail):
            raise ValueError("guided scaffold: the environment's last user message does not end with the scaffold's hint")
        last = out[users[-1]]
        out[users[-1]] = last.model_copy(update={"content": last.content[:-len(tail)]})
    return out


def with_help(task: Task, shots: list[Message], hint: str | None, prefix: str | None,
              guided: float | None) -> Task:
    """``task`` with help in its prompt: the worked-example turns ``shots`` after any system
    messages, ``hint`` at the end of the last user message, and the marks that say so
    (``metadata["scaffold"]``: what the rollout, evaluation's refusal and
    :func:`unaided_messages` read). ``guided``: the share of a group's episodes that get the help,
    all trained against the plain prompt; None: every episode helped, the help kept as context."""
    users = [i for i, m in enumerate(task.prompt) if m.role == "user"]
    if not users:
        raise ValueError(f"task {task.id!r} (domain {task.domain!r}): its prompt has no user message to scaffold")
    lead = 0
    while lead < len(task.prompt) and task.prompt[lead].role == "system":
        lead += 1
    prompt = [m.model_copy() for m in task.prompt]
    if hint:
        last = prompt[users[-1]]
        prompt[users[-1]] = Message(role="user", content=f"{last.content}\n\n{hint}")
    prompt = prompt[:lead] + shots + prompt[lead:]
    marks: dict[str, Any] = {"examples": len(shots) // 2, "hint": bool(hint), "prefix": prefix}
    if guided is not None:  # what unaided_messages() needs to take the help out of the trained context
        marks.update(guided=guided, shots=[m.content for m in shots], hint_text=hint)
    return task.model_copy(update={"prompt": prompt, "metadata": {**task.metadata, "scaffold": marks}})


class Scaffold:
    """One domain's scaffold: its schedule, its help, and its measure of success without it."""

    def __init__(self, domain: str, cfg: ScaffoldConfig) -> None:
        self.domain, self.cfg = domain, cfg
        self.removed_at: int | None = None
        self.unaided: list[float] = []  # rewards of the last `window` unscaffolded episodes
        self.delay = 0  # steps discarded by roll-backs: the schedule runs on the policy's steps
        # groups of this domain drawn so far (the clock of `clock: groups`); a resume restores the
        # checkpoint's count, so groups drawn after it and recovered in flight are not counted
        self.groups = 0
        self.lacking: list[str] | None = None  # a score's components, the first time one lacked `success`

    def level(self, step: int) -> float:
        """Share of help in force at ``step`` (under ``clock: groups``, after the groups drawn so
        far): 1 before the fade, 0 after it or once removed."""
        c = self.cfg
        if self.removed_at is not None:
            return 0.0
        if c.schedule == "constant":
            return 1.0
        at = self.groups if c.clock == "groups" else step - self.delay
        frac = min(max((at - c.fade_start) / (c.fade_end - c.fade_start), 0.0), 1.0)
        if c.schedule == "linear":
            return 1.0 - frac
        return 1.0 - int(frac * c.stages) / c.stages

    def decide(self, step: int, rng: random.Random) -> bool:
        """Whether a group of this domain drawn at ``step`` is scaffolded (``rng`` seeded by the
        draw); the draw counts on the groups clock."""
        helped = rng.random() < self.level(step) * (1.0 - self.cfg.probe_share)
        self.groups += 1
        return helped

    def rewound(self, lost: int) -> None:
        """The policy was rolled back ``lost`` steps, and this scaffold's state to the checkpoint's:
        a steps clock runs ``lost`` steps later; a groups clock came back with the loaded count."""
        if self.cfg.clock == "steps":
            self.delay += lost

    def apply(self, task: Task) -> ScaffoldedTask:
        """The task with the help in its prompt; the original is not changed."""
        shots = [m for ex in self.cfg.examples
                 for m in (Message(role="user", content=ex.question), Message(role="assistant", content=ex.reply))]
        helped = with_help(task, shots, self.cfg.hint, self.cfg.prefix, self.cfg.share if self.cfg.guided else None)
        return ScaffoldedTask(task=helped, prefix=self.cfg.prefix)

    def measure(self, score: Score | None) -> float:
        """One unaided episode's success: its score's value, or its ``success`` component (0 when
        the episode has no score or the score lacks the component)."""
        if score is None:
            return 0.0
        if self.cfg.success is None:
            return score.value
        if self.cfg.success not in score.components and self.lacking is None:
            self.lacking = sorted(score.components)  # told once (the driver records it): likely a misnamed component
        return float(score.components.get(self.cfg.success, 0.0))

    def observe(self, scaffolded: bool, rewards: list[float], step: int) -> ScaffoldChange | None:
        """A finished group; unscaffolded ones measure success without help (``rewards``: each
        unaided episode's :meth:`measure`)."""
        if scaffolded or self.removed_at is not None:
            return None
        self.unaided = (self.unaided + list(rewards))[-self.cfg.window:]
        if self.cfg.threshold is None or len(self.unaided) < self.cfg.window:
            return None
        success = sum(self.unaided) / len(self.unaided)
        if success < self.cfg.threshold:
            return None
        self.removed_at = step
        return ScaffoldChange(domain=self.domain, step=step, success=success)

    def state(self) -> dict[str, Any]:
        return {"removed_at": self.removed_at, "unaided": list(self.unaided), "delay": self.delay, "groups": self.groups}

    def load(self, state: dict[str, Any]) -> None:
        self.removed_at = None if state["removed_at"] is None else int(state["removed_at"])
        self.unaided = [float(x) for x in state["unaided"]]
        self.delay = int(state.get("delay", 0))  # absent in checkpoints written before roll-backs rewound it
        self.groups = int(state.get("groups", 0))  # absent in checkpoints written before the groups clock
