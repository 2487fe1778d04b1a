"""Engines generate tokens. ``HFEngine`` runs transformers in-process; ``ScriptedEngine`` is a
test seam. Heavy backends (vLLM, HTTP) live in their own modules and are imported lazily."""

from practicum.engines.base import Completion, Engine, SamplingParams
from practicum.engines.scripted import ScriptedEngine

__all__ = ["Completion", "Engine", "SamplingParams", "ScriptedEngine", "HFEngine"]


def __getattr__(name: str):  # lazy: importing transformers costs seconds
    if name == "HFEngine":
        from practicum.engines.hf import HFEngine

        return HFEngine
    raise AttributeError(name)
