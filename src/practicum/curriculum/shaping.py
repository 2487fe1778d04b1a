"""Reward shaping: the training reward as a weighted sum of named components, and a running
per-domain normalisation.

Components of one attempt (all logged separately, raw, before weighting):

* ``correctness``: the verifier's score value (in [0, 1]).
* ``format``: 1 when the reply matches ``format_pattern`` (default: an ``<answer>...</answer>``
  pair, :data:`practicum.scoring.ANSWER_TAG`), else 0.
* ``overlong``: DAPO's soft over-length penalty (Yu et al. 2025, eq. 13). With L = ``max_tokens``
  and a buffer B: 0 up to L - B tokens, falling linearly to -1 at L, -1 beyond.
* ``length``: Kimi k1.5's group-relative length reward (Kimi Team 2025, sec. 2.3.3): with the
  shortest and longest reply of the group, lambda = 0.5 - (len - min) / (max - min); a correct
  reply gets lambda, an incorrect one min(0, lambda) (never paid for being short and wrong).
  0 when all replies have the same length.
* ``partial``: a partial-credit component the verifier reports (``partial_key`` of the score's
  components; 0 when absent).

The shaped reward is the weighted sum; it may be negative and is the training reward only:
``Score.value`` stays the verifier's verdict in [0, 1], which evaluation reports.

**Per-domain normalisation.** :class:`RewardNorm` keeps each domain's running mean and
standard deviation (Welford) of shaped rewards and maps a reward to (r - mean) / std. Under
``algorithm.advantage: grpo`` a group's advantages do not change under an affine map of its
rewards, so this matters where rewards are compared across groups without the group's own
std: ``drgrpo`` advantages, the replay priority, the mixer's mean |advantage|.
"""

from __future__ import annotations

import math
import re
from typing import Any

from pydantic import BaseModel, Field, field_validator

from practicum.curriculum.base import Strict
from practicum.records import Episode, Score
from practicum.scoring import ANSWER_TAG


class ShapingConfig(Strict):
    correctness: float = Field(default=1.0, description="Weight of the verifier's score value.")
    format: float = Field(default=0.0, description="Weight of the format component (1 when the reply matches format_pattern). "
                          "Note scoring.RewardWeights: a format reward alone was learned as echoing the prompt.")
    overlong: float = Field(default=0.0, ge=0, description="Weight of DAPO's soft over-length penalty (0 down to -1).")
    overlong_buffer: int = Field(default=16, ge=1, description="Tokens before the length limit where the over-length penalty ramps from 0 to -1.")
    length: float = Field(default=0.0, ge=0, description="Weight of Kimi k1.5's group-relative length reward (shorter right answers gain).")
    partial: float = Field(default=0.0, description="Weight of the verifier's partial-credit component (partial_key).")
    partial_key: str = Field(default="partial", description="Name of the score component holding partial credit.")
    correct_at: float = Field(default=1.0, ge=0, le=1, description="length: a reply whose score value reaches this counts as correct.")
    format_pattern: str = Field(default=ANSWER_TAG.pattern, description="Regular expression a well-formatted reply contains.")
    normalise: bool = Field(default=False, description="Map each domain's shaped rewards to (r - running mean) / running std.")

    @field_validator("format_pattern")
    @classmethod
    def _compiles(cls, v: str) -> str:
        try:
            re.compile(v)
        except re.error as e:
            raise ValueError(f"format_pattern is not a regular expression: {e}") from e
        return v


class Attempt(BaseModel):
    """What shaping reads of one episode."""

    reply: str  # the model's text, all turns
    tokens: int  # generated tokens, all turns
    score: Score


class ShapedReward(BaseModel):
    total: float
    components: dict[str, float]  # raw (unweighted) value of each component


def attempt_of(episode: Episode) -> Attempt:
    """An episode's replies, generated tokens and score (an unscored episode scores 0)."""
    replies = [m.content for m in episode.messages if m.role == "assistant"]  # a forced prefix included
    return Attempt(reply="\n".join(replies or [t.text for t in episode.turns]),
                   tokens=sum(len(t.completion_ids) for t in episode.turns),
                   score=episode.score or Score(value=0.0, explanation="not scored"))


def overlong_penalty(tokens: int, max_tokens: int, buffer: int) -> float:
    """DAPO's soft penalty: 0 up to max_tokens - buffer, linear to -1 at max_tokens, -1 beyond."""
    start = max_tokens - buffer
    if tokens <= start:
        return 0.0
    if tokens <= max_tokens:
        return (start - tokens) / buffer
    return -1.0


def length_rewards(lengths: list[int], correct: list[bool]) -> list[float]:
    """Kimi k1.5's group-relative length reward of each reply of one group."""
    lo, hi = min(lengths, default=0), max(lengths, default=0)
    if hi == lo:
        return [0.0] * len(lengths)
    lam = [0.5 - (n - lo) / (hi - lo) for n in lengths]
    return [v if ok else min(0.0, v) for v, ok in zip(lam, correct)]


def shape_group(attempts: list[Attempt], cfg: ShapingConfig, max_tokens: int) -> list[ShapedReward]:
    """Shaped rewards of one group's attempts (the length reward compares them to each other)."""
    pattern = re.compile(cfg.format_pattern, re.DOTALL)
    lengths = length_rewards([a.tokens for a in attempts], [a.score.value >= cfg.correct_at for a in attempts])
    out = []
    for a, length in zip(attempts, lengths):
        comps = {
            "correctness": a.score.value,
            "format": 1.0 if pattern.search(a.reply) else 0.0,
            "overlong": overlong_penalty(a.tokens, max_tokens, cfg.overlong_buffer),
            "length": length,
            "partial": float(a.score.components.get(cfg.partial_key, 0.0)),
        }
        total = sum(getattr(cfg, name) * value for name, value in comps.items())
        out.append(ShapedReward(total=total, components=comps))
    return out


class RewardNorm:
    """Running mean and standard deviation of each domain's rewards (Welford's algorithm)."""

    def __init__(self, min_std: float = 1e-6) -> None:
        self.min_std = min_std
        self.stats: dict[str, list[float]] = {}  # domain -> [count, mean, sum of squared deviations]

    def update(self, domain: str, rewards: list[float]) -> None:
        n, mean, m2 = self.stats.get(domain, [0.0, 0.0, 0.0])
        for r in rewards:
            n += 1
            delta = r - mean
            mean += delta / n
            m2 += delta * (r - mean)
        self.stats[domain] = [n, mean, m2]

    def std(self, domain: str) -> float:
        n, _, m2 = self.stats.get(domain, [0.0, 0.0, 0.0])
        return math.sqrt(m2 / n) if n > 0 else 0.0

    def apply(self, domain: str, rewards: list[float]) -> list[float]:
        """(r - mean) / std by the domain's running figures; only centred while its std is ~0."""
        _, mean, _ = self.stats.get(domain, [0.0, 0.0, 0.0])
        std = self.std(domain)
        scale = std if std > self.min_std else 1.0
        return [(r - mean) / scale for r in rewards]

    def state(self) -> dict[str, Any]:
        return {"min_std": self.min_std, "stats": {d: list(v) for d, v in self.stats.items()}}

    def load(self, state: dict[str, Any]) -> None:
        self.min_std = float(state["min_std"])
        self.stats = {d: [float(x) for x in v] for d, v in state["stats"].items()}
