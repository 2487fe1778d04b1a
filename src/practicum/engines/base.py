"""The Engine protocol: turn token contexts into sampled completions, and take new weights.

An engine works on token ids, not text, so that the ids it samples are exactly the ids the
trainer trains on. Chat rendering lives here too (``chat_ids``/``append_ids``) because it
depends on the model's tokenizer and template; environments speak in messages only.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal, Protocol, runtime_checkable

import torch

from practicum.records import Message


@dataclass(frozen=True)
class SamplingParams:
    max_new_tokens: int = 128
    temperature: float = 1.0  # 0 means greedy
    top_p: float = 1.0
    stop: tuple[str, ...] = ()  # stop strings, in addition to the end-of-turn token
    seed: int | None = None  # makes a call reproducible


@dataclass
class Completion:
    ids: list[int]  # sampled token ids, ending with the stop token when finish_reason is "stop"
    logprobs: list[float]  # log-prob of each sampled token under the sampling distribution
    text: str  # decoded, without special tokens
    finish_reason: Literal["stop", "length"]
    policy_version: int
    seconds: float = 0.0
    extra: dict[str, float] = field(default_factory=dict)


@runtime_checkable
class Engine(Protocol):
    """Generates tokens. Implementations: :class:`HFEngine`, :class:`ScriptedEngine`."""

    policy_version: int

    def chat_ids(self, messages: list[Message]) -> list[int]:
        """Render a conversation with the model's chat template, ending with the assistant cue.
        Engines whose template renders tools also accept ``tools=`` (OpenAI-style schemas) here
        and in ``append_ids``, and say so with a true ``supports_tools`` attribute."""
        ...

    def append_ids(self, messages: list[Message], new: list[Message], context_ids: list[int] | None = None) -> list[int]:
        """The ids that extend ``messages`` (already rendered as ``context_ids``) by ``new`` and
        the assistant cue."""
        ...

    async def generate(self, prompts: list[list[int]], params: SamplingParams) -> list[Completion]:
        """Sample one completion per prompt, batched."""
        ...

    def load_weights(self, state: Mapping[str, torch.Tensor], version: int) -> None:
        """Replace the weights in place (colocated trainer) and set the policy version."""
        ...


@runtime_checkable
class ContinuousEngine(Engine, Protocol):
    """An engine that batches concurrent requests itself (continuous batching): each request
    joins the running decode batch between steps and returns as soon as it ends. Implemented
    by :class:`HFEngine`; :class:`~practicum.engines.batching.BatchingEngine` hands such an
    engine every request at once instead of one batch at a time."""

    async def submit(self, ids: list[int], params: SamplingParams) -> Completion:
        """Sample one completion for ``ids``, batched with whatever else is running."""
        ...

    async def publish(self, state: Mapping[str, torch.Tensor], version: int) -> None:
        """Load new weights between two decode steps, without blocking the event loop."""
        ...
