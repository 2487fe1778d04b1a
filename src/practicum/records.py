"""Typed records for everything that crosses a boundary: tasks, scores, episodes, groups.

Records are pydantic models so that they validate on construction and round-trip through the
store as JSON without loss. An :class:`Episode` keeps the exact token ids the engine produced
and their behaviour log-probabilities, with a loss mask per token: tokens the model generated
are trained on (mask 1); tokens the environment inserted (tool observations, later turns'
prompts) are context only (mask 0). Nothing is ever re-tokenised between turns. What the
rollout learns about an episode besides its score (how it ended, its tool use, its verifier's
flags) is an :class:`EpisodeInfo`.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator


def new_id() -> str:
    return uuid.uuid4().hex[:16]


class Message(BaseModel):
    """One chat message. ``content`` is text; tool use arrives in later domains."""

    model_config = ConfigDict(extra="forbid")
    role: Literal["system", "user", "assistant", "tool"]
    content: str


class Task(BaseModel):
    """One problem. ``target`` is what the verifier compares against; the model never sees it."""

    model_config = ConfigDict(extra="forbid")
    id: str
    domain: str
    prompt: list[Message]
    target: Any = None
    metadata: dict[str, Any] = Field(default_factory=dict)


class Score(BaseModel):
    """A verifier's verdict: ``value`` in [0, 1], named components, and why."""

    model_config = ConfigDict(extra="forbid")
    value: float
    components: dict[str, float] = Field(default_factory=dict)
    explanation: str = ""

    @field_validator("value")
    @classmethod
    def _in_unit_interval(cls, v: float) -> float:
        if not 0.0 <= v <= 1.0:
            raise ValueError(f"score value must lie in [0, 1], got {v}")
        return v


class EpisodeError(BaseModel):
    """A failure confined to one episode (see :mod:`practicum.errors`): data, not a crash."""

    kind: str
    message: str


class Turn(BaseModel):
    """One model turn: the context it saw (as ids), what it generated, and how."""

    prompt_ids: list[int]  # the full context at this turn, as the engine received it
    completion_ids: list[int]  # generated tokens, exactly as sampled
    logprobs: list[float]  # behaviour log-prob of each generated token, [len(completion_ids)]
    text: str
    finish_reason: Literal["stop", "length"]
    policy_version: int
    gen_seconds: float = 0.0


EndReason = Literal["running", "done", "turn_limit", "token_limit", "time_limit", "failed"]
"""Why an episode ended: ``done`` (the environment said so: a final answer, ``submit``), a
rollout limit (``turn_limit``, ``token_limit``, ``time_limit``: the environment's ``finish``
scored the state reached), or ``failed`` (a rollout failure, recorded in ``Episode.errors``).
``running``: not ended yet."""


class EpisodeInfo(BaseModel):
    """What the rollout records about an episode besides its turns and score.

    The rollout sets ``end_reason`` and ``tools_presented``; environments report the rest
    through ``Observation.info``, a plain dict merged in by :meth:`merge`: ``tool_calls``,
    ``tool_errors`` and ``flags`` land in their fields, any other key in ``extra`` (a domain's
    own details, documented by its environment: the terminal domain's ``git_diff``, the code
    domain's ``verify`` statistics...).

    Episodes stored before this record existed kept ``info`` as a free dict with the same key
    names; they load unchanged: known keys fill their fields, ``tool_error_count`` (now derived)
    is dropped, any other key goes to ``extra``.
    """

    model_config = ConfigDict(validate_assignment=True)
    end_reason: EndReason = "running"
    tools_presented: Literal["chat_template", "system_prompt"] | None = None  # None: the episode had no tools
    tool_calls: dict[str, int] = Field(default_factory=dict)  # tool name -> calls that ran (submit included)
    tool_errors: dict[str, int] = Field(default_factory=dict)  # kind (malformed, unknown_tool, no_call...) -> count
    flags: list[str] = Field(default_factory=list)  # reward-hack patterns the verifier saw (practicum.verify.flags)
    extra: dict[str, Any] = Field(default_factory=dict)  # domain-specific details, by the environment's key
    sandbox_cpu_s: float = 0.0  # CPU seconds of the sandbox executions its environment made (practicum.sandbox.meter)
    sandbox_runs: int = 0  # those executions (tool runs, tests, set-up)

    @property
    def tool_error_count(self) -> int:
        return sum(self.tool_errors.values())

    def merge(self, info: Mapping[str, Any]) -> None:
        """Take in an environment's ``Observation.info``. Its values replace earlier ones (an
        environment reports its running totals). Keys the rollout owns are refused: an
        environment that sends them is a bug."""
        for key, value in info.items():
            if key in _ENV_FIELDS:
                setattr(self, key, value)
            elif key in EpisodeInfo.model_fields:
                raise ValueError(f"an environment may not set Episode.info.{key} (the rollout owns it)")
            else:
                self.extra[key] = value

    @model_validator(mode="before")
    @classmethod
    def _accept_the_old_dict(cls, data: Any) -> Any:
        if not isinstance(data, dict) or data.keys() <= cls.model_fields.keys():
            return data
        out = {k: v for k, v in data.items() if k in cls.model_fields}
        rest = {k: v for k, v in data.items() if k not in cls.model_fields and k != "tool_error_count"}
        out["extra"] = {**out.get("extra", {}), **rest}
        return out


_ENV_FIELDS = frozenset({"tool_calls", "tool_errors", "flags"})


class EpisodeState(StrEnum):
    """Lifecycle of an episode, recorded in the store when each transition happens.

    ``queued`` (drawn, waiting for a slot) -> ``generating`` (the model is writing a turn) <->
    ``executing`` (the environment runs the turn's actions) -> ``scoring`` (the verifier runs)
    -> ``ready`` (scored, not yet trained on) -> ``trained``. Off the main path: ``dropped``
    (kept out of training on purpose, with a reason: stale, its group dropped...) and
    ``failed`` (an infrastructure error outlived its retries: error kind and attempt count).
    """

    queued = "queued"
    generating = "generating"
    executing = "executing"
    scoring = "scoring"
    ready = "ready"
    trained = "trained"
    dropped = "dropped"
    failed = "failed"
    done = "ready"  # the older name of ready


ACTIVE_EPISODE = frozenset({EpisodeState.queued, EpisodeState.generating, EpisodeState.executing, EpisodeState.scoring})


class Episode(BaseModel):
    """A full trajectory of one attempt at one task."""

    id: str = Field(default_factory=new_id)
    task_id: str
    domain: str
    messages: list[Message] = Field(default_factory=list)
    turns: list[Turn] = Field(default_factory=list)
    score: Score | None = None
    errors: list[EpisodeError] = Field(default_factory=list)
    state: EpisodeState = EpisodeState.generating
    attempt: int = 1  # 1 + the retries this episode took (a retry starts the episode afresh)
    reason: str = ""  # why it was dropped or failed
    started_at: float = Field(default_factory=time.time)
    seconds: float = 0.0
    info: EpisodeInfo = Field(default_factory=EpisodeInfo)

    @property
    def reward(self) -> float:
        return self.score.value if self.score is not None else 0.0

    @property
    def policy_version(self) -> int:
        return min((t.policy_version for t in self.turns), default=-1)

    @property
    def trainable(self) -> bool:
        """Whether the loss may use it: it has turns, and it was scored - or it failed through
        the model's own output (data, scored 0). An infrastructure failure (environment,
        verifier, engine) is kept out of the loss."""
        if not self.turns:
            return False
        if self.state == EpisodeState.failed:
            return bool(self.errors) and self.errors[-1].kind == "model_output"
        return self.state not in (EpisodeState.dropped,)

    def training_sequence(self) -> tuple[list[int], list[int], list[float]]:
        """The token ids of the whole trajectory, their loss mask and behaviour log-probs.

        Built from the engine's own ids: turn k's prompt ids must extend turn k-1's prompt and
        completion (the environment appends, never rewrites), so the last turn's context plus its
        completion is the whole episode. Tokens of earlier completions keep mask 1 and their
        sampled log-probs; everything else (prompt, observations) has mask 0.
        """
        if not self.turns:
            return [], [], []
        ids: list[int] = []
        mask: list[int] = []
        logps: list[float] = []
        for turn in self.turns:
            if turn.prompt_ids[: len(ids)] != ids:
                raise ValueError(f"episode {self.id}: turn context does not extend the previous turn")
            extra = turn.prompt_ids[len(ids):]
            ids += extra + turn.completion_ids
            mask += [0] * len(extra) + [1] * len(turn.completion_ids)
            logps += [0.0] * len(extra) + list(turn.logprobs)
        return ids, mask, logps


class GroupState(StrEnum):
    """Lifecycle of a group in the store (see :class:`EpisodeState` for its episodes)."""

    queued = "queued"  # drawn, waiting for admission
    generating = "generating"  # its episodes are running
    ready = "ready"  # every episode ended (scored or failed), not yet trained on
    trained = "trained"  # consumed by an update (and kept by a checkpoint, after a resume)
    dropped = "dropped"  # kept out of training on purpose, with a reason
    failed = "failed"  # could not be completed: too few episodes survived their retries
    evaluated = "evaluated"  # an evaluation group (never trained on)
    pending = "queued"  # older names
    scored = "ready"


TERMINAL_GROUP = frozenset({GroupState.trained, GroupState.dropped, GroupState.failed, GroupState.evaluated})


class Group(BaseModel):
    """The n episodes of one task that GRPO compares: the unit of scheduling and storage."""

    id: str = Field(default_factory=new_id)
    task: Task
    episodes: list[Episode] = Field(default_factory=list)
    state: GroupState = GroupState.queued
    step: int = -1  # the training step that consumed (or will consume) it
    policy_version: int = 0  # the policy version when it was dispatched
    draw: int = -1  # its index in the run's sequence of drawn tasks (-1: not drawn by the orchestrator)
    attempts: int = 1  # how many times its rollouts were started (a re-queue after a crash adds one)
    reason: str = ""  # why it was dropped or failed

    @property
    def rewards(self) -> list[float]:
        return [e.reward for e in self.episodes]
