"""The Engine and Renderer protocols: turn token contexts into sampled completions, take new
weights, and render conversations into those token contexts.

An engine works on token ids, not text, so that the ids it samples are exactly the ids the
trainer trains on. Environments speak in messages only; an engine's ``renderer`` turns them
into ids with the model's tokenizer and chat template. A renderer holds no model, so the
engines that serve one model (and wrappers such as
:class:`~practicum.engines.batching.BatchingEngine`) share one: :class:`~practicum.engines.render.ChatRenderer`
for transformers tokenizers, a byte renderer for :class:`~practicum.engines.scripted.ScriptedEngine`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

import torch

from practicum.records import Message


@dataclass(frozen=True)
class SamplingParams:
    max_new_tokens: int = 128
    temperature: float = 1.0  # 0 means greedy
    top_p: float = 1.0
    stop: tuple[str, ...] = ()  # stop strings, in addition to the end-of-turn token
    seed: int | None = None  # makes a call reproducible
    keep_prefix: bool = False  # the conversation may go on: an engine may keep its KV cache for the next turn


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
class Renderer(Protocol):
    """Renders conversations into the token ids of one model, and its samples back into text."""

    @property
    def supports_tools(self) -> bool:
        """Whether the chat template renders tool schemas (the ``tools`` arguments); when not,
        the rollout presents tools in the system prompt and passes none here."""
        ...

    @property
    def stop_ids(self) -> tuple[int, ...]:
        """The tokens that end a turn."""
        ...

    def chat_ids(self, messages: list[Message], tools: list[dict[str, Any]] | None = None) -> list[int]:
        """Render a conversation, ending with the assistant cue. ``tools``: OpenAI-style schemas."""
        ...

    def append_ids(self, messages: list[Message], new: list[Message], context_ids: list[int] | None = None,
                   tools: list[dict[str, Any]] | None = None) -> list[int]:
        """The ids that extend ``messages`` (already rendered as ``context_ids``) by ``new`` and
        the assistant cue; the ids already held are never re-tokenised."""
        ...

    def text_ids(self, text: str) -> list[int]:
        """The ids of plain ``text`` (no template): a forced start of a reply, after the cue."""
        ...

    def decode(self, ids: list[int]) -> str:
        """The text of ``ids``, without special tokens."""
        ...


@runtime_checkable
class Engine(Protocol):
    """Generates tokens. Implementations: :class:`HFEngine`, :class:`ScriptedEngine`, and the
    :class:`BatchingEngine` wrapper."""

    @property
    def policy_version(self) -> int:
        """The version of the weights that new requests sample from."""
        ...

    @property
    def renderer(self) -> Renderer:
        """How conversations become this engine's prompts."""
        ...

    async def generate(self, prompts: list[list[int]], params: SamplingParams) -> list[Completion]:
        """Sample one completion per prompt, batched."""
        ...

    def load_weights(self, state: Mapping[str, torch.Tensor], version: int) -> None:
        """Replace the weights in place (colocated trainer) and set the policy version."""
        ...

    async def close(self) -> None:
        """Stop serving: requests still waiting fail. A wrapper closes what it started, not the
        engine it wraps (that engine's owner closes it)."""
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


class EngineWrapper:
    """Base of an engine that wraps another (``self.engine``): the policy version and the renderer
    are the wrapped engine's."""

    engine: Any

    @property
    def policy_version(self) -> int:
        return int(self.engine.policy_version)

    @property
    def renderer(self) -> Renderer:
        return self.engine.renderer  # type: ignore[no-any-return]
