"""Training across many domains without losing skills: mixing, difficulty sequencing, replay,
reward shaping, a fading scaffold and a drift guard (docs/curriculum.md).

Each mechanism is a small module with its own config model and a plain-dict state for
checkpoints; :class:`Curriculum` builds them all from a :class:`CurriculumConfig`, the
``curriculum:`` section of a run config. :class:`practicum.curriculum.driver.Driver` calls them
from the training loop (docs/curriculum.md, "In the loop").
"""

from practicum.curriculum.difficulty import (
    DifficultyPools,
    FilterConfig,
    FilterDecision,
    LevelChange,
    LevelCurriculum,
    LevelsConfig,
    PassRates,
    PoolsConfig,
    Refill,
    band_pass,
    refill,
)
from practicum.curriculum.drift import DriftConfig, DriftDecision, DriftGuard, mcnemar_p, paired_t_p
from practicum.curriculum.mixing import DeficitSampler, DomainMixer, MixingConfig
from practicum.curriculum.parts import Curriculum, CurriculumConfig
from practicum.curriculum.replay import ReplayBuffer, ReplayConfig, ReplayPick, age_weights, check_correction
from practicum.curriculum.retain import RetainConfig, retained_advantages
from practicum.curriculum.scaffold import Scaffold, ScaffoldChange, ScaffoldConfig, ScaffoldedTask, is_scaffolded
from practicum.curriculum.shaping import Attempt, RewardNorm, ShapedReward, ShapingConfig, attempt_of, shape_group

__all__ = [
    "Attempt", "Curriculum", "CurriculumConfig", "DeficitSampler", "DifficultyPools", "DomainMixer", "DriftConfig",
    "DriftDecision", "DriftGuard", "FilterConfig", "FilterDecision", "LevelChange", "LevelCurriculum", "LevelsConfig",
    "MixingConfig", "PassRates", "PoolsConfig", "Refill", "ReplayBuffer", "ReplayConfig", "ReplayPick", "RetainConfig", "RewardNorm",
    "Scaffold", "ScaffoldChange", "ScaffoldConfig", "ScaffoldedTask", "ShapedReward", "ShapingConfig", "age_weights",
    "attempt_of", "band_pass", "check_correction", "is_scaffolded", "mcnemar_p", "paired_t_p", "refill",
    "retained_advantages", "shape_group",
]
