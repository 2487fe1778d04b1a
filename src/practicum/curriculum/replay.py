"""Experience replay: a bounded buffer of high-signal groups, mixed back into later batches.

A trained group whose mean |advantage| reaches ``min_signal`` enters the buffer (a uniform
group, advantage 0 everywhere, never does). Its priority at step t is

    signal x 0.5 ** ((t - step added) / half_life)

so large-advantage groups and recent groups come first (RePO, ExGRPO: replaying the groups
that still carry signal). Each step replays ``round(share x prompts_per_step)`` groups in place
of as many fresh ones, drawn without replacement with probability proportional to priority
(Efraimidis-Spirakis keys from a generator the caller seeds per step). A full buffer evicts its
lowest priority entry; an entry used ``max_uses`` times or generated more than ``max_age``
policy versions ago is no longer drawn (and is pruned).

The buffer keeps group ids, not groups: the groups themselves (token ids, behaviour
log-probs, rewards) are in the run's store, which is where the caller loads them from; the
buffer's state is a small dict for the checkpoint.

**Age.** A replayed group was sampled by an older policy. Its tokens carry their behaviour
log-probs, so the off-policy correction of :mod:`practicum.algorithms` applies unchanged:
with ``algorithm.off_policy`` ``tis`` or ``decoupled`` each token is weighted by
pi_prox / pi_behaviour (:func:`practicum.algorithms.behaviour_weights`). Replay without a
correction is refused by :func:`check_correction`. :func:`age_weights` gives the same weight
per sequence (the geometric mean over its trained tokens, capped), for a trainer or a metric
that wants one number per replayed episode.
"""

from __future__ import annotations

import math
import random
from typing import Any

import torch
from pydantic import BaseModel, Field

from practicum import algorithms as A
from practicum.curriculum.base import Strict


class ReplayConfig(Strict):
    enabled: bool = Field(default=False, description="Keep high-signal groups and replay a share of each batch from them.")
    capacity: int = Field(default=256, ge=1, description="Most groups in the buffer; the lowest priority is evicted first.")
    share: float = Field(default=0.25, ge=0, le=0.9, description="Share of each step's groups taken from the buffer instead of fresh draws.")
    min_signal: float = Field(default=0.1, ge=0, description="Least mean |advantage| for a trained group to enter the buffer.")
    half_life: float = Field(default=20.0, gt=0, description="Steps after which a group's priority has halved (recency).")
    max_age: int = Field(default=8, ge=1, description="Most policy versions between a group's generation and its replay.")
    max_uses: int = Field(default=2, ge=1, description="Most times one group is replayed.")
    weight_cap: float = Field(default=2.0, ge=1, description="Cap on the per-sequence age weight of age_weights().")


class ReplayEntry(BaseModel):
    group_id: str
    domain: str
    signal: float  # mean |advantage| of its trained episodes when it was trained
    step: int  # the step that first trained it
    version: int  # the policy version that generated its oldest turn
    uses: int = 0


class ReplayPick(BaseModel):
    """A group to replay this step: load it from the store by ``group_id``."""

    group_id: str
    domain: str
    priority: float
    age: int  # policy versions since it was generated


def check_correction(off_policy: str) -> None:
    """Replayed tokens are off-policy by construction: refuse a run that would not correct them."""
    if off_policy == "none":
        raise ValueError("curriculum.replay needs algorithm.off_policy tis or decoupled: replayed groups were "
                         "sampled by an older policy, and 'none' would train on them uncorrected")


def age_weights(prox_logp: torch.Tensor, behaviour_logp: torch.Tensor, mask: torch.Tensor, cap: float) -> torch.Tensor:
    """Per-sequence importance weight of replayed samples: the geometric mean of the token
    weights pi_prox / pi_behaviour over the trained tokens, at most ``cap``.

    prox_logp, behaviour_logp, mask: [B, T] -> [B]. A sequence without trained tokens gets 1.
    """
    log_w = torch.log(A.behaviour_weights(prox_logp, behaviour_logp))  # [B, T]
    on = mask > 0
    total = torch.where(on, log_w, torch.zeros_like(log_w)).sum(dim=1)  # [B]
    count = on.sum(dim=1).clamp(min=1)  # [B]
    return torch.exp(total / count).clamp(max=cap)


class ReplayBuffer:
    def __init__(self, cfg: ReplayConfig) -> None:
        self.cfg = cfg
        self.entries: dict[str, ReplayEntry] = {}

    def priority(self, entry: ReplayEntry, step: int) -> float:
        return entry.signal * 0.5 ** ((step - entry.step) / self.cfg.half_life)

    def add(self, group_id: str, domain: str, advantages: list[float], step: int, version: int) -> bool:
        """Offer a freshly trained group; returns whether it entered the buffer."""
        if not advantages:
            return False
        signal = sum(abs(a) for a in advantages) / len(advantages)
        if signal < self.cfg.min_signal or group_id in self.entries:
            return False
        self.entries[group_id] = ReplayEntry(group_id=group_id, domain=domain, signal=signal, step=step, version=version)
        while len(self.entries) > self.cfg.capacity:
            worst = min(self.entries.values(), key=lambda e: (self.priority(e, step), e.step, e.group_id))
            del self.entries[worst.group_id]
        return group_id in self.entries

    def prune(self, version: int) -> None:
        """Drop entries too old to replay or used up."""
        self.entries = {k: e for k, e in self.entries.items()
                        if version - e.version <= self.cfg.max_age and e.uses < self.cfg.max_uses}

    def split(self, prompts_per_step: int, version: int) -> tuple[int, int]:
        """(fresh, replayed) group counts of a step: the configured share, as far as the buffer
        holds eligible groups."""
        self.prune(version)
        k = min(round(self.cfg.share * prompts_per_step), len(self.entries))
        return prompts_per_step - k, k

    def sample(self, k: int, step: int, version: int, rng: random.Random) -> list[ReplayPick]:
        """``k`` distinct groups, drawn with probability proportional to priority; each
        pick counts as a use."""
        self.prune(version)
        keyed = []
        for e in self.entries.values():
            p = self.priority(e, step)
            # Efraimidis-Spirakis: the k largest u ** (1 / p) are a weighted draw without replacement
            keyed.append((math.log(1.0 - rng.random()) / p if p > 0 else -math.inf, e.group_id))
        keyed.sort(reverse=True)
        picks = []
        for _, gid in keyed[:k]:
            e = self.entries[gid]
            e.uses += 1
            picks.append(ReplayPick(group_id=gid, domain=e.domain, priority=self.priority(e, step), age=version - e.version))
        return picks

    def state(self) -> dict[str, Any]:
        return {"entries": [e.model_dump() for e in self.entries.values()]}

    def load(self, state: dict[str, Any]) -> None:
        self.entries = {e["group_id"]: ReplayEntry(**e) for e in state["entries"]}
