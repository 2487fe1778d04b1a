"""A run's curriculum section, and the parts built from it, checkpointed as one dict.

``CurriculumConfig`` is what a ``curriculum:`` section of the run config will hold (every part
off or neutral by default, so a config without the section trains as before). :class:`Curriculum`
builds each part for the run's domains and gathers their states into one plain dict for the
checkpoint; :meth:`Curriculum.load` puts them back on resume, and :meth:`Curriculum.rewind`
puts back the parts that describe the policy when the drift guard rolls it back.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field, model_validator

from practicum.curriculum.base import Strict
from practicum.curriculum.difficulty import (
    DifficultyPools,
    FilterConfig,
    LevelCurriculum,
    LevelsConfig,
    PassRates,
    PoolsConfig,
    RevisitConfig,
    Revisits,
)
from practicum.curriculum.drift import DriftConfig, DriftGuard
from practicum.curriculum.mixing import DeficitSampler, DomainMixer, MixingConfig
from practicum.curriculum.replay import ReplayBuffer, ReplayConfig
from practicum.curriculum.retain import RetainConfig
from practicum.curriculum.scaffold import Scaffold, ScaffoldConfig
from practicum.curriculum.shaping import RewardNorm, ShapingConfig


class CurriculumConfig(Strict):
    mixing: MixingConfig = Field(default_factory=MixingConfig, description="Domain weights and how the trained mix is held to them.")
    filter: FilterConfig = Field(default_factory=FilterConfig, description="Band-pass filter on groups by mean reward, with refill.")
    pools: PoolsConfig = Field(default_factory=PoolsConfig, description="Difficulty pools: accept drawn tasks by their pass rate.")
    levels: dict[str, LevelsConfig] = Field(default_factory=dict, description="Level curriculum of generator parameters, by domain name.")
    revisit: RevisitConfig = Field(default_factory=RevisitConfig, description="Failed tasks re-issued later, within their domain's draws.")
    replay: ReplayConfig = Field(default_factory=ReplayConfig, description="Replay of high-signal groups.")
    retain: RetainConfig = Field(default_factory=RetainConfig, description="A small positive advantage on mastered groups "
                                                                           "(every reply right), so the mix does not wear them away.")
    shaping: dict[str, ShapingConfig] = Field(default_factory=dict, description="Reward shaping by domain name (absent: the score value alone).")
    scaffold: dict[str, ScaffoldConfig] = Field(default_factory=dict, description="A fading scaffold, by domain name.")
    drift: DriftConfig = Field(default_factory=DriftConfig, description="Drift guard on held-out evaluations.")

    @model_validator(mode="after")
    def _retain_needs_uniform_groups(self) -> CurriculumConfig:
        if self.retain.enabled and self.filter.enabled:
            raise ValueError("curriculum.retain: the filter (curriculum.filter) drops every group whose replies scored alike "
                             "before the update, so no mastered group would be left to retain; turn one of them off")
        return self

    def check_domains(self, names: list[str]) -> None:
        """Every per-domain entry must name a domain of the run (a typo is an error, not a no-op)."""
        for section, named in (("mixing.weights", self.mixing.weights), ("levels", self.levels),
                               ("shaping", self.shaping), ("scaffold", self.scaffold), ("retain.domains", self.retain.domains),
                               ("revisit.domains", self.revisit.domains)):
            unknown = sorted(set(named) - set(names))
            if unknown:
                raise ValueError(f"curriculum.{section}: no domain named {', '.join(unknown)} (domains: {', '.join(names)})")


class Curriculum:
    """The curriculum parts of one run, for the domains ``weights`` names (domain -> weight)."""

    def __init__(self, cfg: CurriculumConfig, weights: dict[str, float]) -> None:
        names = list(weights)
        cfg.check_domains(names)
        self.cfg = cfg
        self.mixer = DomainMixer(cfg.mixing, weights)
        self.sampler = DeficitSampler(self.mixer.targets(), cfg.mixing.horizon)
        self.rates = PassRates(cfg.pools.decay)
        self.pools = DifficultyPools(cfg.pools, self.rates)
        self.levels = {d: LevelCurriculum(d, c) for d, c in cfg.levels.items()}
        self.revisits = Revisits(cfg.revisit)
        self.replay = ReplayBuffer(cfg.replay)
        self.norm = RewardNorm()
        self.scaffolds = {d: Scaffold(d, c) for d, c in cfg.scaffold.items()}
        self.drift = DriftGuard(cfg.drift)

    def shaping(self, domain: str) -> ShapingConfig:
        return self.cfg.shaping.get(domain) or ShapingConfig()

    def state(self) -> dict[str, Any]:
        return {
            "mixer": self.mixer.state(),
            "sampler": self.sampler.state(),
            "rates": self.rates.state(),
            "levels": {d: c.state() for d, c in self.levels.items()},
            "revisits": self.revisits.state(),
            "replay": self.replay.state(),
            "norm": self.norm.state(),
            "scaffolds": {d: s.state() for d, s in self.scaffolds.items()},
            "drift": self.drift.state(),
        }

    def load(self, state: dict[str, Any]) -> None:
        self._load_policy_view(state)
        self.sampler.load(state["sampler"])
        self.drift.load(state["drift"])

    def rewind(self, state: dict[str, Any], lost: int) -> None:
        """The drift guard put back the policy of an earlier checkpoint whose curriculum was
        ``state``, discarding ``lost`` steps: what was learnt about the discarded policy goes back
        with it - pass rates, levels, the tasks it failed (revisits), the mixer's measure of signal,
        reward statistics, the replay buffer (its groups were the discarded policy's, the collapse
        itself among them), and each scaffold, whose fade then runs ``lost`` steps later or from
        the checkpoint's count of groups (a policy put back to before the format was learnt gets
        back the help it had).
        Kept: the sampler's balance of the trained stream and the groups in flight (the
        orchestrator's, and real) and the drift guard's history (:meth:`DriftGuard.rolled_back`
        cuts the discarded branch from it)."""
        self._load_policy_view(state)
        for s in self.scaffolds.values():
            s.rewound(lost)

    def _load_policy_view(self, state: dict[str, Any]) -> None:
        """The parts that describe the policy: all but the sampler and the drift guard."""
        self.mixer.load(state["mixer"])
        self.rates.load(state["rates"])
        for d, c in self.levels.items():
            c.load(state["levels"][d])
        self.replay.load(state["replay"])
        self.revisits.load(state.get("revisits", {}))  # absent from checkpoints from before revisits
        self.norm.load(state["norm"])
        for d, s in self.scaffolds.items():
            s.load(state["scaffolds"][d])
