"""Holding what a domain has mastered: a small positive advantage on groups whose every reply was right.

A GRPO group whose replies all earned the same reward has advantage 0 everywhere, so nothing in
the update defends what it shows. In a run of one domain that costs nothing: nothing else moves
the policy there. In a mix it does: the other domains' updates move the weights that a mastered
skill rests on, and the skill's all-right groups, which would say "keep this", say nothing. The
multidomain benchmark measured it (RESULTS.md, twenty-sixth run): held-out products that the
mixed run answered right at step 5 turned wrong by one later (``6 * 7 = 42`` → ``43``, ``4 * 9 =
36`` → ``37``), next to the additions the mix trains, while the domain's training groups were
mostly all right.

With ``enabled``, a trained group counts as *mastered* when it carries no GRPO signal (its
advantages are all 0), every trainable reply succeeded - its verifier score (or the score's
``success`` component) at least ``threshold`` - and no reply had the help of a scaffold (help
that made it right is not mastery). Its first ``samples`` replies then train with advantage
``advantage`` and the rest stay out of the update as before. Under the clipped surrogate, a reply
the policy itself sampled, at ratio 1, with advantage ``a``, has gradient ``a`` x the gradient of its
log-probability: a small step of self-imitation on what the domain already does right (the
replies of a mastered group are alike, so one of them carries nearly all of it; more cost
training time and add little). Off by default; ``domains`` limits it to some domains.

Only the update sees these advantages: the reported share of uniform groups, the mixer's measure
of signal and the replay buffer read the group's own (zero) advantages.

Tried on that benchmark (advantage 0.5 on 2 replies, one seed) it did not hold the mix's products:
the same facts went wrong by one, and the other domains ended lower. It is not part of the
benchmark's config.
"""

from __future__ import annotations

from pydantic import Field

from practicum.algorithms import NO_SIGNAL
from practicum.curriculum.base import Strict
from practicum.records import Group, Score
from practicum.rollout import was_helped


class RetainConfig(Strict):
    enabled: bool = Field(default=False, description="Train a reply of each mastered group (every reply right, no GRPO signal) "
                                                     "with a small positive advantage, so the other domains' updates do not wear away "
                                                     "what a domain has learnt.")
    advantage: float = Field(default=0.1, gt=0, le=1, description="The advantage a mastered group's trained replies carry "
                                                                  "(GRPO's advantages of a mixed group are about ±1).")
    samples: int = Field(default=1, ge=1, description="Replies of a mastered group that are trained (the first ones); they are alike.")
    success: str | None = Field(default=None, description="The score component that counts as a right reply (None: the score's value).")
    threshold: float = Field(default=1.0, ge=0, le=1, description="A reply is right when its success is at least this.")
    domains: list[str] = Field(default_factory=list, description="The domains it applies to (empty: every domain).")


def succeeded(score: Score | None, cfg: RetainConfig) -> bool:
    """Whether one reply's score counts as right: its value, or its ``success`` component (absent
    counts 0), at least ``threshold``."""
    if score is None:
        return False
    value = score.value if cfg.success is None else float(score.components.get(cfg.success, 0.0))
    return value >= cfg.threshold


def retained_advantages(group: Group, advantages: list[float], cfg: RetainConfig) -> list[float] | None:
    """The advantages a mastered group's trainable replies train with (``advantages``: their GRPO
    advantages, in the order of its trainable episodes), or None when the group is not mastered:
    retain off, a domain it does not cover, a GRPO signal, a reply not right, or a reply helped."""
    if not cfg.enabled or (cfg.domains and group.task.domain not in cfg.domains):
        return None
    eps = [e for e in group.episodes if e.trainable]
    if not eps or len(eps) != len(advantages) or any(abs(a) > NO_SIGNAL for a in advantages):
        return None
    if any(was_helped(e) or not succeeded(e.score, cfg) for e in eps):
        return None
    return [cfg.advantage if i < cfg.samples else 0.0 for i in range(len(eps))]
