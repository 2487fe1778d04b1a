"""Practicum: post-train language models with reinforcement learning in real, verifiable
environments. Public API; internals may move."""

from practicum.config import RunConfig, load_config
from practicum.errors import (
    CheckpointError,
    ConfigError,
    EnvironmentFailure,
    ModelError,
    ModelOutputFailure,
    PracticumError,
    RolloutFailure,
    StoreError,
    TaskError,
    VerifierFailure,
)
from practicum.records import Episode, EpisodeInfo, Group, GroupState, Message, Score, Task, Turn

__version__ = "0.1.0"

__all__ = [
    "CheckpointError", "ConfigError", "EnvironmentFailure", "Episode", "EpisodeInfo", "Group", "GroupState", "Message",
    "ModelError", "ModelOutputFailure", "PracticumError", "RolloutFailure", "RunConfig", "Score", "StoreError",
    "Task", "TaskError", "Turn", "VerifierFailure", "load_config", "__version__",
]
